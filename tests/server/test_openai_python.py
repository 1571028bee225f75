"""`minfer serve` driven by the official `openai` Python client (and raw HTTP where the client
hides what is checked: keep-alive, malformed JSON, 413). Fixtures: conftest.py."""
import http.client
import json
import threading
import time
import urllib.request

import openai
import pytest

from conftest import metric

MSG = [{"role": "user", "content": "What is the capital of France?"}]
PROMPTS = ["What is the capital of France?", "Name three colors.", "Write a haiku about the sea.",
           "What is 2 + 2?"]


def client(server, **kw):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=kw.pop("api_key", "none"), max_retries=0, **kw)


def greedy(c, content, max_tokens=24, **kw):
    r = c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": content}],
                                  temperature=0, max_tokens=max_tokens, **kw)
    return r


def test_models(server):
    ids = [m.id for m in client(server).models.list()]
    assert ids == ["smollm2"]


def test_chat_non_stream(server):
    r = greedy(client(server), PROMPTS[0], max_tokens=16)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.model == "smollm2"
    ch = r.choices[0]
    assert ch.index == 0 and ch.message.role == "assistant"
    assert isinstance(ch.message.content, str) and ch.message.content
    assert ch.finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 16
    assert r.usage.prompt_tokens > 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_matches_non_stream(server):
    c = client(server)
    solo = greedy(c, PROMPTS[1], max_tokens=20)
    chunks = list(c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": PROMPTS[1]}],
                                            temperature=0, max_tokens=20, stream=True,
                                            stream_options={"include_usage": True}))
    assert len({k.id for k in chunks}) == 1, "one id per stream"
    assert all(k.object == "chat.completion.chunk" for k in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(k.choices[0].delta.content or "" for k in chunks if k.choices)
    assert text == solo.choices[0].message.content
    finishes = [k.choices[0].finish_reason for k in chunks if k.choices and k.choices[0].finish_reason]
    assert finishes == [solo.choices[0].finish_reason]
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.completion_tokens == solo.usage.completion_tokens
    assert all(k.usage is None for k in chunks[:-1])


def test_stream_without_usage_has_no_usage_chunk(server):
    chunks = list(client(server).chat.completions.create(model="smollm2", messages=MSG, temperature=0, max_tokens=4,
                                                         stream=True))
    assert all(k.choices for k in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_max_tokens_length(server):
    r = greedy(client(server), PROMPTS[2], max_tokens=5)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5
    r2 = client(server).chat.completions.create(model="x", messages=MSG, temperature=0, max_completion_tokens=3)
    assert r2.usage.completion_tokens == 3


def test_stop_string(server):
    c = client(server)
    full = greedy(c, PROMPTS[0], max_tokens=24).choices[0].message.content
    words = full.split()
    assert len(words) >= 4, full
    stop = " " + words[2]
    r = greedy(c, PROMPTS[0], max_tokens=24, stop=[stop, "never-appears"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == full[:full.index(stop)]


def test_logprobs(server):
    r = greedy(client(server), PROMPTS[3], max_tokens=8, logprobs=True, top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert len(lp) == r.usage.completion_tokens
    for t in lp:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        assert t.top_logprobs[0].token == t.token  # greedy picks the most likely token
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token or t.bytes


def test_legacy_completions(server):
    c = client(server)
    r = c.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=6, temperature=0,
                             logprobs=2)
    assert r.object == "text_completion" and r.choices[0].finish_reason in ("stop", "length")
    assert len(r.choices[0].logprobs.tokens) == r.usage.completion_tokens
    assert "".join(r.choices[0].logprobs.tokens).startswith(r.choices[0].text)
    s = "".join(k.choices[0].text for k in c.completions.create(model="smollm2", prompt="The capital of France is",
                                                                 max_tokens=6, temperature=0, stream=True))
    assert s == r.choices[0].text


def test_n_choices_and_seed(server):
    c = client(server)
    kw = dict(model="smollm2", messages=MSG, max_tokens=12, temperature=1.0, n=2, seed=7)
    a = c.chat.completions.create(**kw)
    b = c.chat.completions.create(**kw)
    assert [x.index for x in a.choices] == [0, 1]
    assert [x.message.content for x in a.choices] == [x.message.content for x in b.choices]


def test_tools_and_all_roles_reach_template(server):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    msgs = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    r = client(server).chat.completions.create(model="smollm2", messages=msgs, tools=tools, max_tokens=4,
                                               temperature=0,
                                               presence_penalty=0.5, frequency_penalty=0.5, top_p=0.9, logit_bias={"28": -100},
                                               extra_body={"top_k": 20, "min_p": 0.1, "unknown_field": 1})
    assert r.choices[0].finish_reason in ("stop", "length")


def test_errors(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="smollm2", messages=MSG, temperature="hot")
    assert e.value.body["param"] == "temperature" and e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="smollm2", messages=[])
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="smollm2", messages=MSG, top_logprobs=30, logprobs=True)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "word " * 1100}])
    assert e.value.body["code"] == "context_length_exceeded" and "1024" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="smollm2", messages=MSG, max_tokens=5000)
    assert "5000" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:  # OpenAI answers 400 to a role it does not know
        c.chat.completions.create(model="smollm2", messages=[{"role": "wizard", "content": "hi"}])
    assert e.value.body["param"] == "messages[0].role" and "wizard" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        c.get("/nope", cast_to=object)
    # Malformed JSON: the client cannot send it, so raw HTTP.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=b"{not json", headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 400 and body["error"]["type"] == "invalid_request_error" and "JSON" in body["error"]["message"]


def test_keep_alive_reused_after_stream(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = json.dumps({"messages": MSG, "max_tokens": 4, "temperature": 0, "stream": True})
    conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    data = resp.read().decode()
    assert data.rstrip().endswith("data: [DONE]")
    sock = conn.sock
    assert sock is not None, "the server closed the connection after the stream"
    conn.request("GET", "/v1/models")
    resp2 = conn.getresponse()
    assert resp2.status == 200 and json.loads(resp2.read())["data"][0]["id"] == "smollm2"
    assert conn.sock is sock, "a new connection was opened"
    conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": MSG, "max_tokens": 3}),
                 headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 200 and conn.sock is sock


def test_concurrent_streams_equal_solo(server):
    c = client(server)
    solo = [greedy(c, p, max_tokens=24).choices[0].message.content for p in PROMPTS]
    steps0 = metric(server.url, "minfer_batch_steps_total")
    gen0 = metric(server.url, "minfer_generated_tokens_total")
    out = [None] * len(PROMPTS)

    def run(i):
        cc = client(server)
        s = cc.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": PROMPTS[i]}],
                                       temperature=0, max_tokens=24, stream=True)
        out[i] = "".join(k.choices[0].delta.content or "" for k in s if k.choices)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == solo
    steps = metric(server.url, "minfer_batch_steps_total") - steps0
    gen = metric(server.url, "minfer_generated_tokens_total") - gen0
    assert steps < 0.75 * gen, f"{steps} forward passes for {gen} tokens: the streams were not batched"


def test_abort_mid_stream_frees_slot(server):
    c = client(server)
    cancelled0 = metric(server.url, "minfer_jobs_cancelled_total")
    # Ban end-of-text so that only the client can end it early.
    stream = c.completions.create(model="smollm2", prompt="Once upon a time", max_tokens=800, temperature=0,
                                  stream=True, logit_bias={"0": -100, "1": -100, "2": -100})
    got = 0
    for _ in stream:
        got += 1
        if got == 3:
            break
    stream.close()
    assert_one_cancelled_and_idle(server, cancelled0)
    assert greedy(c, PROMPTS[0], max_tokens=2).usage.completion_tokens == 2  # still serving


def assert_one_cancelled_and_idle(server, cancelled0):
    """Within 10 s: exactly one more job cancelled and no slot busy."""
    deadline = time.time() + 10
    while time.time() < deadline:
        if metric(server.url, "minfer_jobs_cancelled_total") > cancelled0 and metric(server.url, "minfer_slots_busy") == 0:
            break
        time.sleep(0.05)
    assert metric(server.url, "minfer_jobs_cancelled_total") == cancelled0 + 1
    assert metric(server.url, "minfer_slots_busy") == 0


def test_abort_non_stream_frees_slot(server):
    """A client that drops a non-streaming request: its generation stops and its slot frees."""
    import http.client
    import json as _json
    from urllib.parse import urlparse
    cancelled0 = metric(server.url, "minfer_jobs_cancelled_total")
    u = urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    body = _json.dumps({"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 800, "temperature": 0,
                        "logit_bias": {"0": -100, "1": -100, "2": -100}})
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    time.sleep(0.5)  # generating
    assert metric(server.url, "minfer_slots_busy") >= 1
    import socket as _socket
    conn.sock.shutdown(_socket.SHUT_RDWR)  # the client goes away without reading the reply
    resp.close()
    conn.close()
    assert_one_cancelled_and_idle(server, cancelled0)
    assert greedy(client(server), PROMPTS[0], max_tokens=2).usage.completion_tokens == 2  # still serving


def test_metrics_format(server):
    with urllib.request.urlopen(server.url + "/metrics") as r:
        text = r.read().decode()
    for name in ("minfer_requests_total", "minfer_generated_tokens_total", "minfer_request_duration_seconds_bucket",
                 "minfer_queue_length", "minfer_slots_busy", "minfer_time_to_first_token_seconds_sum"):
        assert name in text
    assert 'minfer_requests_total{path="/v1/chat/completions",status="200"}' in text


def test_auth(strict_server):
    with pytest.raises(openai.AuthenticationError) as e:
        client(strict_server, api_key="wrong").models.list()
    assert e.value.status_code == 401 and e.value.body["code"] == "invalid_api_key"
    assert [m.id for m in client(strict_server, api_key="sekret").models.list()] == ["smollm2"]
    with urllib.request.urlopen(strict_server.url + "/health") as r:  # no key needed
        assert r.status == 200


def test_413_body_too_large(strict_server):
    conn = http.client.HTTPConnection("127.0.0.1", strict_server.port, timeout=10)
    body = json.dumps({"messages": [{"role": "user", "content": "x" * 20000}]})
    conn.request("POST", "/v1/chat/completions", body=body,
                 headers={"Content-Type": "application/json", "Authorization": "Bearer sekret"})
    resp = conn.getresponse()
    assert resp.status == 413
    assert json.loads(resp.read())["error"]["code"] == "request_too_large"


def test_503_when_full(strict_server):
    c = client(strict_server, api_key="sekret")
    stream = c.completions.create(model="smollm2", prompt="Once upon a time", max_tokens=200, temperature=0,
                                  stream=True, logit_bias={"0": -100, "1": -100, "2": -100})
    next(iter(stream))  # the only slot is busy, the queue holds 0
    with pytest.raises(openai.InternalServerError) as e:
        c.chat.completions.create(model="smollm2", messages=MSG, max_tokens=2)
    assert e.value.status_code == 503 and e.value.response.headers.get("Retry-After") == "1"
    stream.close()


def test_sigterm_drains_in_flight_stream():
    from conftest import ServerProcess
    s = ServerProcess("--parallel", "1", "-c", "256", "-t", "1")
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stream": True,
                       "logit_bias": {"0": -100, "1": -100, "2": -100}})
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = resp.readline()
    assert first.startswith(b"data: ")
    s.proc.send_signal(15)  # SIGTERM while the stream is in flight
    rest = resp.read().decode()
    assert rest.rstrip().endswith("data: [DONE]"), rest[-300:]
    assert '"finish_reason":"length"' in rest
    assert s.proc.wait(timeout=60) == 0, s.read_log()


def test_follow_up_reuses_slot_cache(server):
    c = client(server)
    msgs = [{"role": "user", "content": "Give me a fruit name."}]
    r1 = c.chat.completions.create(model="m", messages=msgs, temperature=0, max_tokens=8)
    msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
             {"role": "user", "content": "And a vegetable?"}]
    r2 = c.chat.completions.create(model="m", messages=msgs, temperature=0, max_tokens=4)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    assert cached >= r1.usage.prompt_tokens, (cached, r1.usage.prompt_tokens)
    assert cached < r2.usage.prompt_tokens


def test_response_format_json_object(server):
    r = client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "Describe a cat."}],
                                               max_tokens=150, seed=5, response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content), dict)
