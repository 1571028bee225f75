"""OpenAI's Responses API (/v1/responses) on `minfer serve`, driven by the official `openai`
Python client: a response is the same text as the chat completion of the same conversation
(instructions = the system message), the streamed events rebuild it (the client's
`responses.stream()` accumulator checks their order and indices), max_output_tokens makes it
incomplete, function tools both ways, JSON output through text.format, llama-server's telemetry
fields, and the errors."""
import json

import openai
import pytest

from conftest import ServerProcess, post_json

SYSTEM = "Answer briefly."
QUESTION = "What is the capital of Germany?"
T0 = {"temperature": 0}
WEATHER = {"type": "function", "name": "get_weather", "description": "Get the weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def srv():
    s = ServerProcess("--parallel", "2", "-c", "4096", "-t", "2")
    yield s
    assert s.stop() == 0


def client(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)


def chat_text(srv, messages, max_tokens):
    r = client(srv).chat.completions.create(model="smollm2", messages=messages, max_tokens=max_tokens, **T0)
    return r.choices[0].message.content, r.usage


def test_response_is_the_chat_completion(srv):
    c = client(srv)
    r = c.responses.create(model="smollm2", instructions=SYSTEM, input=QUESTION, max_output_tokens=24, **T0)
    assert r.id.startswith("resp_") and r.object == "response" and r.model == "smollm2"
    assert r.output[0].type == "message" and r.output[0].id.startswith("msg_") and r.output[0].role == "assistant"
    assert r.instructions == SYSTEM and r.max_output_tokens == 24
    text, usage = chat_text(srv, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}], 24)
    assert r.output_text == text and "Berlin" in text
    assert r.usage.input_tokens == usage.prompt_tokens and r.usage.output_tokens == usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.status == ("incomplete" if usage.completion_tokens == 24 else "completed")
    # The same conversation as an item list (a system message, a user message with input_text parts).
    r2 = c.responses.create(model="smollm2", max_output_tokens=24, **T0, input=[
        {"role": "system", "content": SYSTEM},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}])
    assert r2.output_text == text


def test_max_output_tokens_makes_it_incomplete(srv):
    r = client(srv).responses.create(model="smollm2", input="Tell me a long story about a dragon.", max_output_tokens=5, **T0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 5


def test_stream_rebuilds_the_response(srv):
    c = client(srv)
    plain = c.responses.create(model="smollm2", instructions=SYSTEM, input=QUESTION, max_output_tokens=24, **T0)
    types, deltas = [], ""
    for ev in c.responses.create(model="smollm2", instructions=SYSTEM, input=QUESTION, max_output_tokens=24, stream=True, **T0):
        types.append(ev.type)
        if ev.type == "response.output_text.delta":
            deltas += ev.delta
        if ev.type == "response.completed":
            final = ev.response
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert deltas == plain.output_text == final.output_text
    assert final.usage.output_tokens == plain.usage.output_tokens and final.status == plain.status
    # The client's own accumulator checks every event's output_index and content_index.
    with c.responses.stream(model="smollm2", instructions=SYSTEM, input=QUESTION, max_output_tokens=24, **T0) as s:
        text = "".join(ev.delta for ev in s if ev.type == "response.output_text.delta")
        done = s.get_final_response()
    assert text == done.output_text == plain.output_text


def test_function_call_round_trip(srv):
    c = client(srv)
    r = c.responses.create(model="smollm2", input="What is the weather in Paris?", tools=[WEATHER],
                           tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=64, **T0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].id.startswith("fc_")
    assert isinstance(json.loads(calls[0].arguments).get("city"), str)
    # Streamed: the same call, rebuilt by the client's accumulator.
    with c.responses.stream(model="smollm2", input="What is the weather in Paris?", tools=[WEATHER],
                            tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=64, **T0) as s:
        args = "".join(ev.delta for ev in s if ev.type == "response.function_call_arguments.delta")
        done = s.get_final_response()
    streamed = [o for o in done.output if o.type == "function_call"]
    assert len(streamed) == 1 and streamed[0].arguments == args == calls[0].arguments
    # The call and its output go back in as items: the reply is the chat completion's for the
    # same conversation (assistant tool_calls, then a tool message).
    r2 = c.responses.create(model="smollm2", tools=[WEATHER], max_output_tokens=32, **T0, input=[
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather", "arguments": calls[0].arguments},
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 24 C"}])
    chat = c.chat.completions.create(model="smollm2", max_tokens=32, **T0, tools=[{"type": "function", "function": {
        k: WEATHER[k] for k in ("name", "description", "parameters")}}], messages=[
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": calls[0].call_id, "type": "function", "function": {
            "name": "get_weather", "arguments": calls[0].arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny, 24 C"}]).choices[0].message
    assert r2.output_text == (chat.content or "")
    assert [(o.name, o.arguments) for o in r2.output if o.type == "function_call"] == \
        [(t.function.name, t.function.arguments) for t in chat.tool_calls or []]
    assert r2.usage.input_tokens > r.usage.input_tokens


def test_json_schema_text_format(srv):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}
    r = client(srv).responses.create(model="smollm2", input=QUESTION, max_output_tokens=48, **T0,
                                     text={"format": {"type": "json_schema", "name": "city", "schema": schema}})
    assert isinstance(json.loads(r.output_text)["city"], str)


def test_llama_telemetry(srv):
    status, body = post_json(srv.url, "/responses", {"input": "This is a test " * 10, "max_output_tokens": 4, "stream": True,
                                                     "timings_per_token": True, "return_progress": True})
    assert status == 200
    events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    named = [line[7:] for line in body.splitlines() if line.startswith("event: ")]
    assert named == [e["type"] for e in events]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    progress = [e for e in events if "prompt_progress" in e]
    assert progress and all(e["type"] == "response.in_progress" for e in progress)
    assert progress[-1]["prompt_progress"]["processed"] == progress[-1]["prompt_progress"]["total"]
    assert all("predicted_per_second" in e["timings"] for e in events if e["type"] == "response.output_text.delta")
    done = events[-1]
    assert done["type"] == "response.completed" and done["timings"]["predicted_n"] == done["response"]["usage"]["output_tokens"] == 4


def test_errors(srv):
    c = client(srv)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        c.responses.create(model="smollm2", input="hi", previous_response_id="resp_123")
    for body, param in [({}, "input"), ({"input": 3}, "input"), ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
                        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/a.png"}]}]},
                         "input[0].content[0]"),
                        ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
                        ({"input": "hi", "max_output_tokens": -2}, "max_output_tokens")]:
        status, reply = post_json(srv.url, "/v1/responses", body)
        assert status == 400 and reply["error"]["param"] == param, (body, reply)


def test_an_error_after_acceptance(srv):
    """Every token banned: the sampler fails at once. Plain: a 500 with the error object. Streamed:
    an `error` event, then `response.failed` (OpenAI's events), which the client yields."""
    ban = {"input": "Hi", "max_output_tokens": 4, "logit_bias": [[i, False] for i in range(49152)]}
    status, reply = post_json(srv.url, "/v1/responses", ban)
    assert status == 500 and "masked" in reply["error"]["message"], reply
    events = list(client(srv).responses.create(model="smollm2", input="Hi", max_output_tokens=4, stream=True,
                                               extra_body={"logit_bias": ban["logit_bias"]}))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-2:] == ["error", "response.failed"], types
    assert "masked" in events[-2].message and events[-1].response.status == "failed"
