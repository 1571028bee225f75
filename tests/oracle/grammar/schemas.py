"""JSON Schemas covering every construct minfer's converter supports (src/grammar/json-schema.h),
each with a prompt that invites SmolLM2 to write such a document. Required properties come
before optional ones, so llama.cpp's converter (which orders them that way) writes keys in the
same order as minfer's (which keeps the schema's order).
"""

SCHEMAS = [
    ("person", "Describe a person as JSON.", {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "email": {"type": "string", "pattern": "^[a-z]{1,10}@[a-z]{1,10}\\.(com|org)$"},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }),
    ("event", "Give an event with a date, a time and an id, as JSON.", {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "time"},
            "stamp": {"type": "string", "format": "date-time"},
        },
        "required": ["id", "day", "at", "stamp"],
    }),
    ("bounds", "Write some numbers as JSON.", {
        "type": "object",
        "properties": {
            "small": {"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 5},
            "neg": {"type": "integer", "maximum": -100},
            "big": {"type": "integer", "minimum": 1000},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "pos": {"type": "number", "exclusiveMinimum": 0},
            "any": {"type": "number"},
        },
        "required": ["small", "neg", "big", "ratio", "pos", "any"],
    }),
    ("enum-const", "Pick a color and a version as JSON.", {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue", 7, None, True, {"x": [1, 2]}]},
            "version": {"const": "v1"},
            "nothing": {"type": "null"},
            "flag": {"type": "boolean"},
        },
        "required": ["color", "version", "nothing", "flag"],
    }),
    ("union", "Write a value that is a string or a number or null, as JSON.", {
        "anyOf": [{"type": "string", "maxLength": 8}, {"type": "integer"}, {"type": "null"}],
    }),
    ("one-of", "Describe a shape as JSON.", {
        "oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}}, "required": ["kind", "r"]},
            {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1}}, "required": ["kind", "side"]},
        ],
    }),
    ("all-of", "Describe a named thing with an id as JSON.", {
        "allOf": [
            {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]},
            {"properties": {"name": {"type": "string", "maxLength": 16}}, "required": ["name"]},
        ],
    }),
    ("refs", "Describe a family tree as JSON.", {
        "$defs": {
            "person": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 12}, "children": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 2}},
                "required": ["name"],
            },
        },
        "$ref": "#/$defs/person",
    }),
    ("tuple", "Write a point and a label as a JSON array.", {
        "type": "array",
        "prefixItems": [{"type": "number"}, {"type": "number"}, {"type": "string", "maxLength": 10}],
        "items": False,
        "minItems": 2,
    }),
    ("list", "List three to five fruits as a JSON array.", {
        "type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 12}, "minItems": 3, "maxItems": 5,
    }),
    ("open-object", "Give a settings object as JSON.", {
        "type": "object",
        "properties": {"mode": {"enum": ["fast", "slow"]}},
        "required": ["mode"],
        "additionalProperties": {"type": "integer"},
    }),
    ("types", "Write a value as JSON.", {"type": ["string", "boolean"], "maxLength": 5}),
    ("pattern", "Write a product code as JSON.", {"type": "string", "pattern": "^[A-Z]{2,3}-\\d{3}(-[a-z]+)?$"}),
    ("nested", "Describe an order with items as JSON.", {
        "type": "object",
        "properties": {
            "order": {"type": "integer", "minimum": 1, "maximum": 99999},
            "items": {
                "type": "array", "minItems": 1, "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string", "pattern": "^[0-9]{4}$"}, "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
                    "required": ["sku", "qty"], "additionalProperties": False,
                },
            },
            "note": {"type": "string", "maxLength": 20},
        },
        "required": ["order", "items"],
    }),
]

# Schemas minfer must refuse, with a part of the message that names the keyword or value, and
# the JSON pointer.
REFUSED = [
    ({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}, "#/properties/n", "multipleOf"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "#/uniqueItems", "uniqueItems"),
    ({"type": "string", "format": "email"}, "#/format", "email"),
    ({"type": "object", "patternProperties": {"^x": {}}}, "#", "patternProperties"),
    ({"$ref": "https://example.com/s.json"}, "#/$ref", "only local references"),
    ({"$ref": "#/$defs/missing"}, "#/$ref", "points to nothing"),
    ({"type": "string", "pattern": "^(?=a)b$"}, "#/pattern", "lookarounds"),
    ({"type": "number", "minimum": 0.5}, "#/minimum", "non-integral"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "#", "admit no integer"),
    ({"type": "frobnicate"}, "#/type", "unknown type"),
    ({"not": {"type": "string"}}, "#", "'not'"),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "if": {}}, "#", "'if'"),
]
