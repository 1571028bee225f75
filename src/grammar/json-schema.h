// JSON Schema -> GBNF: a grammar whose texts are exactly JSON documents the schema accepts
// (or, where noted, a subset of them), for constrained decoding (token-mask.h).
//
//   auto gbnf = json_schema_to_gbnf(R"({"type": "object", "properties": {"n": {"type": "integer"}},
//                                       "required": ["n"]})");
//   if (!gbnf) fail(gbnf.error().message);  // "json-schema #/properties/n: unsupported keyword 'multipleOf'"
//   auto grammar = parse_gbnf(*gbnf);
//
// Supported: type (one or a list), enum, const, properties / required / additionalProperties
// (absent means false when `properties` is given: only the listed keys, in their order),
// anyOf / oneOf (as alternatives; oneOf's "exactly one" is not enforced), allOf (merged
// object schemas), local $ref into $defs / definitions / "#" (recursion allowed), items /
// prefixItems / minItems / maxItems (draft-7 tuple `items` and additionalItems too),
// minLength / maxLength, pattern (json-schema-parts.h: a regex subset), format date / time /
// date-time / uuid, integer bounds (inclusive and exclusive), number bounds with integral
// values. Annotations (title, description, default, examples, $schema, $id, $comment, ...)
// are skipped. Any other keyword is an error naming it and its JSON pointer: a schema is never
// silently loosened.
//
// Numbers are kept to at most 16 integer digits and 3 exponent digits; whitespace between tokens to 22 characters (a blank line and an indent of 20);
// strings are written with raw characters or the escapes JSON defines. Generated keys for
// additionalProperties are never one of the listed names.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace minfer {

// schema_json: the schema as JSON text.
Expected<std::string> json_schema_to_gbnf(std::string_view schema_json);

// The same rules for use inside a larger grammar: `root_name` is the schema's rule, no rule is
// named `root` (unless root_name is) or any of `reserved`; the rules `ws`, `char`, `string`,
// `value`... of a JSON value may be defined. The caller writes its own `root`.
Expected<std::string> json_schema_rules(std::string_view schema_json, const std::string& root_name,
                                        const std::vector<std::string>& reserved);

// Several schemas in one grammar: schema i's rule is named roots[i]; the rules of JSON values
// are shared; none is named `root` or any of `reserved`. Errors name the pointer as
// "#/$defs/s<i>/...".
Expected<std::string> json_schema_rules_many(const std::vector<std::string>& schemas_json, const std::vector<std::string>& roots,
                                             const std::vector<std::string>& reserved);

// Moves a schema's local references ("#", "#/...") under "#/$defs/<def>", for placing it
// inside a larger schema at that key.
void rebase_schema_refs(nlohmann::ordered_json& schema, const std::string& def);

// Any JSON value (object_only: any JSON object), for response_format {"type": "json_object"}.
std::string json_value_gbnf(bool object_only);

}  // namespace minfer
