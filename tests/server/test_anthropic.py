"""Anthropic's Messages API on `minfer serve`, driven by the official `anthropic` Python client:
plain and streamed messages, the same text as the OpenAI endpoint for the same conversation,
tool use both ways (a forced call comes back as a tool_use block; tool_result blocks go back
in), token counting, and the errors the client raises."""
import json
import urllib.error
import urllib.request

import anthropic
import pytest

from conftest import ServerProcess

MSGS = [{"role": "user", "content": "What is the capital of Germany?"}]
T0 = {"extra_body": {"temperature": 0}}  # this client version has no sampling arguments: greedy through the body
WEATHER = {"name": "get_weather", "description": "Get the weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def srv():
    s = ServerProcess("--parallel", "2", "-c", "4096", "-t", "2", "--api-key", "sk-ant-test")
    yield s
    assert s.stop() == 0


def client(srv):
    return anthropic.Anthropic(base_url=srv.url, api_key="sk-ant-test", max_retries=0)


def openai_reply(srv, messages, max_tokens):
    req = urllib.request.Request(srv.url + "/v1/chat/completions", data=json.dumps(
        {"messages": messages, "max_tokens": max_tokens, "temperature": 0}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-ant-test"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def test_message_and_stream_agree_with_the_openai_endpoint(srv):
    c = client(srv)
    m = c.messages.create(model="smollm2", max_tokens=24, **T0, system="Answer briefly.", messages=MSGS)
    assert m.type == "message" and m.role == "assistant" and m.content[0].type == "text"
    assert m.stop_reason in ("end_turn", "max_tokens") and m.usage.input_tokens > 0 and m.usage.output_tokens > 0
    assert "Berlin" in m.content[0].text
    same = openai_reply(srv, [{"role": "system", "content": "Answer briefly."}, *MSGS], 24)
    assert m.content[0].text == same
    with c.messages.stream(model="smollm2", max_tokens=24, **T0, system="Answer briefly.", messages=MSGS) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == m.content[0].text and final.stop_reason == m.stop_reason
    assert final.usage.output_tokens == m.usage.output_tokens


def test_stop_sequences_and_count_tokens(srv):
    c = client(srv)
    full = c.messages.create(model="smollm2", max_tokens=24, **T0, messages=MSGS).content[0].text
    word = full.split()[1]
    m = c.messages.create(model="smollm2", max_tokens=24, **T0, messages=MSGS, stop_sequences=[word])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == word and m.content[0].text == full[: full.index(word)]
    n = c.messages.count_tokens(model="smollm2", messages=MSGS)
    assert n.input_tokens == c.messages.create(model="smollm2", max_tokens=1, messages=MSGS).usage.input_tokens


def test_forced_tool_use_round_trip(srv):
    c = client(srv)
    q = [{"role": "user", "content": "What is the weather in Paris?"}]
    # Anthropic's default allows several calls; a reply cut by max_tokens says max_tokens.
    many = c.messages.create(model="smollm2", max_tokens=64, **T0, tools=[WEATHER],
                             tool_choice={"type": "tool", "name": "get_weather"}, messages=q)
    assert [b.type for b in many.content].count("tool_use") >= 1, many
    assert many.stop_reason == ("max_tokens" if many.usage.output_tokens == 64 else "tool_use"), many
    m = c.messages.create(model="smollm2", max_tokens=64, **T0, tools=[WEATHER],
                          tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}, messages=q)
    calls = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and len(calls) == 1, m
    assert calls[0].name == "get_weather" and isinstance(calls[0].input, dict) and "city" in calls[0].input
    # The result goes back; told not to call again, the model answers in text.
    follow = c.messages.create(model="smollm2", max_tokens=32, **T0, tools=[WEATHER], tool_choice={"type": "none"}, messages=[
        *q, {"role": "assistant", "content": m.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "Sunny, 25 C"}]}])
    assert follow.content[0].type == "text" and follow.content[0].text
    # Streamed, the call arrives as a tool_use block with input_json deltas.
    with c.messages.stream(model="smollm2", max_tokens=64, **T0, tools=[WEATHER],
                           tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                           messages=q) as s:
        final = s.get_final_message()
    streamed = [b for b in final.content if b.type == "tool_use"]
    assert len(streamed) == 1 and streamed[0].input == calls[0].input


def test_errors_are_client_errors(srv):
    c = client(srv)
    with pytest.raises(anthropic.BadRequestError):
        c.messages.create(model="smollm2", max_tokens=8, messages=[{"role": "wizard", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError):
        c.messages.create(model="smollm2", max_tokens=8, messages=MSGS, tools=[{"type": "web_search_20250305", "name": "web_search"}])
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=srv.url, api_key="wrong", max_retries=0).messages.create(
            model="smollm2", max_tokens=8, messages=MSGS)
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model="smollm2", max_tokens=8, messages=[{"role": "user", "content": "word " * 5000}])
    assert "context" in str(e.value)


def test_bad_json_and_busy_have_anthropics_error_shape():
    """The 400 of a body that is not JSON and the 503 of a full server are Anthropic's error
    objects too: {"type": "error", "error": {"type", "message"}}; the client raises by status."""
    import http.client
    s = ServerProcess("--parallel", "1", "--queue", "0", "-c", "512", "-t", "1")
    try:
        req = urllib.request.Request(s.url + "/v1/messages", data=b"{not json", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        body = json.loads(e.value.read())
        assert e.value.code == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert "not valid JSON" in body["error"]["message"]
        # The only slot busy with a stream, no queue: a message is refused as overloaded.
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "stream": True,
                                                                 "ignore_eos": True}), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.readline().startswith(b"data: ")
        c = anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as busy:
            c.messages.create(model="smollm2", max_tokens=4, messages=MSGS)
        assert busy.value.status_code == 503 and busy.value.response.headers.get("Retry-After") == "1"
        assert busy.value.body["type"] == "error" and busy.value.body["error"]["type"] == "overloaded_error"
        assert busy.value.body["error"]["code"] == "server_busy"
        conn.close()
    finally:
        assert s.stop() == 0
