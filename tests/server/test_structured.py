"""Structured output through `minfer serve`: OpenAI's response_format (json_object, json_schema,
and the client's `parse` with a pydantic model), llama-server's `grammar` / `json_schema`
fields on /v1/chat/completions, /v1/completions and /completion, streamed and not, several
clients with different schemas at once; replies are checked by the jsonschema package, not by
minfer. Bad grammars and schemas are a 400 naming the field and the place, before any slot is
used. Fixtures: conftest.py."""
import concurrent.futures
import json

import jsonschema
import openai
import pydantic
import pytest

from conftest import post_json, metric

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"enum": ["Paris", "Rome", "Oslo"]}},
          "required": ["name", "age", "city"], "additionalProperties": False}


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def ask(content):
    return [{"role": "user", "content": content}]


def test_json_schema_response_format_stream_and_not(server):
    c = client(server)
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    for seed in (1, 2):
        r = c.chat.completions.create(model="smollm2", messages=ask("Describe a person."), seed=seed, max_tokens=80, response_format=rf)
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop", text
        jsonschema.validate(json.loads(text), PERSON)
        chunks = c.chat.completions.create(model="smollm2", messages=ask("Describe a person."), seed=seed, max_tokens=80,
                                           response_format=rf, stream=True)
        streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        assert streamed == text


def test_client_parse_with_a_pydantic_model(server):
    class Pet(pydantic.BaseModel):
        name: str
        legs: int
        kind: str

    r = client(server).chat.completions.parse(model="smollm2", messages=ask("Describe a pet."), response_format=Pet,
                                              temperature=0, max_tokens=80)
    pet = r.choices[0].message.parsed
    assert isinstance(pet, Pet) and isinstance(pet.legs, int), r.choices[0].message.content


def test_json_object(server):
    r = client(server).chat.completions.create(model="smollm2", messages=ask("Describe a cat."), max_tokens=150, seed=3,
                                               response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_llama_server_fields(server):
    st, body = post_json(server.url, "/v1/chat/completions", {"messages": ask("Say a."), "grammar": 'root ::= "a"{5}', "max_tokens": 10})
    assert st == 200 and body["choices"][0]["message"]["content"] == "aaaaa", body
    st, body = post_json(server.url, "/v1/chat/completions", {"messages": ask("Pick."), "json_schema": {"enum": ["x", "y"]}, "max_tokens": 10})
    assert st == 200 and json.loads(body["choices"][0]["message"]["content"]) in ("x", "y"), body
    st, body = post_json(server.url, "/v1/completions", {"prompt": "Numbers: ", "json_schema": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}, "max_tokens": 40, "temperature": 0})
    assert st == 200, body
    jsonschema.validate(json.loads(body["choices"][0]["text"]), {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4})
    st, body = post_json(server.url, "/completion", {"prompt": "The answer is", "grammar": 'root ::= " " ("yes" | "no")', "n_predict": 8})
    assert st == 200 and body["content"] in (" yes", " no"), body
    st, body = post_json(server.url, "/v1/chat/completions", {"messages": ask("Hi"), "response_format": {"type": "json_object", "schema": {"const": "42"}}, "max_tokens": 6})
    assert st == 200 and body["choices"][0]["message"]["content"] == '"42"', body


def test_concurrent_clients_with_different_schemas(server):
    schemas = [PERSON,
               {"type": "array", "items": {"type": "string", "maxLength": 10}, "minItems": 1, "maxItems": 3},
               {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": -5, "maximum": 5}}, "required": ["ok", "n"]},
               {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}]
    c = client(server)

    def one(i):
        s = schemas[i % len(schemas)]
        r = c.chat.completions.create(model="smollm2", messages=ask("Answer in JSON."), seed=i, max_tokens=80,
                                      response_format={"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": s}})
        return s, r.choices[0].message.content, r.choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(one, range(12)))
    for s, text, reason in results:
        assert reason == "stop", text
        jsonschema.validate(json.loads(text), s)


@pytest.mark.parametrize("body,param,words", [
    ({"grammar": "root ::= this is (not valid GBNF"}, "grammar", "gbnf 1:"),
    ({"grammar": 'root ::= "a" | b'}, "grammar", "undefined rule 'b'"),
    ({"json_schema": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}}, "json_schema", "#/properties/n: unsupported keyword 'multipleOf'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "format": "email"}}}},
     "response_format.json_schema.schema", "#/format"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema", "json_schema"),
    ({"response_format": {"type": "sound"}}, "response_format.type", "sound"),
    ({"response_format": {"type": "json_object", "schema": {"$ref": "#/nowhere"}}}, "response_format.schema", "points to nothing"),
    ({"grammar": 'root ::= "a"', "json_schema": {"type": "string"}}, "json_schema", "give one"),
])
def test_bad_constraints_are_400_before_any_slot(server, body, param, words):
    steps0 = metric(server.url, "minfer_batch_steps_total")
    st, out = post_json(server.url, "/v1/chat/completions", {"messages": ask("Hi"), "max_tokens": 4, **body})
    assert st == 400, out
    assert out["error"]["param"] == param and words in out["error"]["message"], out
    with pytest.raises(openai.BadRequestError):
        client(server).chat.completions.create(model="smollm2", messages=ask("Hi"), max_tokens=4, extra_body=body)
    assert metric(server.url, "minfer_batch_steps_total") == steps0  # no slot ran
