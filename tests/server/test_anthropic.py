"""Anthropic's Messages API on `minfer serve`, driven by the official `anthropic` Python client:
plain and streamed messages, the same text as the OpenAI endpoint for the same conversation,
tool use both ways (a forced call comes back as a tool_use block; tool_result blocks go back
in), token counting, and the errors the client raises."""
import json
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
