"""Ollama's API on `minfer serve` (the same port as the OpenAI one), driven by the official
`ollama` Python client, unmodified: list / show / ps / version, chat and generate streamed and
not, greedy text equal to the OpenAI endpoint's for the same conversation and sampling, format
"json" and a JSON Schema, options by Ollama's names (seed, temperature, num_predict, stop),
tools -> message.tool_calls and back, thinking, embeddings, and the errors the client raises
(404 for an unknown model, 400 for a bad body). /api/show's model_info is checked against
gguf-py's reading of the same file."""
import json
import math
import os
import time
import urllib.error
import urllib.request

import gguf
import jsonschema
import ollama
import openai
import pytest

from conftest import MODEL, ServerProcess, run_node_test

MSGS = [{"role": "user", "content": "What is the capital of Germany?"}]
GREEDY = {"temperature": 0, "num_predict": 24}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}}}


@pytest.fixture
def srv(server):
    """conftest's server: 4 slots of 1024 positions."""
    return server


def client(srv):
    return ollama.Client(host=srv.url)


def post(srv, path, body):
    """(status, parsed reply) of a raw POST: bodies the client would not send."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(srv.url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(srv, path):
    with urllib.request.urlopen(srv.url + path, timeout=30) as r:
        return json.loads(r.read())


def test_version_list_ps_show(srv):
    c = client(srv)
    assert get(srv, "/api/version")["version"].count(".") == 2
    models = c.list().models
    assert len(models) == 1
    m = models[0]
    assert m.model == "smollm2:latest" and m.size == os.path.getsize(MODEL) and m.digest and m.modified_at
    assert (m.details.format, m.details.family, m.details.parameter_size, m.details.quantization_level) == \
        ("gguf", "llama", "135M", "Q4_1")
    ps = c.ps().models
    assert [p.model for p in ps] == ["smollm2:latest"] and ps[0].context_length == 1024 and ps[0].expires_at
    show = c.show("smollm2")
    assert show.details == m.details and "temperature 0.8" in show.parameters
    assert show.template == get(srv, "/props")["chat_template"]
    assert "completion" in show.capabilities and "tools" in show.capabilities
    # model_info: every scalar metadata key as gguf-py reads it; arrays null unless verbose.
    reader = gguf.GGUFReader(MODEL)
    info = show.modelinfo
    n_checked = 0
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            assert info[name] is None, name
            continue
        want = field.contents()
        assert info[name] == pytest.approx(want) if isinstance(want, float) else info[name] == want, name
        n_checked += 1
    assert n_checked > 15 and info["general.parameter_count"] == sum(int(t.n_elements) for t in reader.tensors)
    verbose = post(srv, "/api/show", {"model": "smollm2", "verbose": True})[1]["model_info"]
    assert len(verbose["tokenizer.ggml.tokens"]) == 49152
    # The ":latest" tag may be given or left out.
    assert c.show("smollm2:latest").details == m.details
    # verbose null is false (not a 500); a verbose that is not a boolean is Ollama's 400.
    status, reply = post(srv, "/api/show", {"model": "smollm2", "verbose": None})
    assert status == 200 and reply["model_info"]["tokenizer.ggml.tokens"] is None
    for v in ("yes", 1):
        status, reply = post(srv, "/api/show", {"model": "smollm2", "verbose": v})
        assert status == 400 and set(reply) == {"error"} and "verbose" in reply["error"], (v, reply)


def test_chat_stream_and_not(srv):
    c = client(srv)
    r = c.chat(model="smollm2", messages=MSGS, options=GREEDY, stream=False)
    assert r.done and r.message.role == "assistant" and "Berlin" in r.message.content
    assert r.done_reason in ("stop", "length") and r.model == "smollm2"
    assert r.prompt_eval_count > 0 and 0 < r.eval_count <= 24
    assert r.total_duration >= r.eval_duration > 0 and r.prompt_eval_duration > 0 and r.load_duration == 0
    parts = list(c.chat(model="smollm2", messages=MSGS, options=GREEDY, stream=True))
    assert all(not p.done for p in parts[:-1]) and parts[-1].done and parts[-1].done_reason == r.done_reason
    assert "".join(p.message.content for p in parts) == r.message.content
    assert parts[-1].eval_count == r.eval_count and parts[-1].prompt_eval_count == r.prompt_eval_count
    assert len(parts) > 3  # streamed piece by piece
    # A body without "stream" is streamed (Ollama's default), as NDJSON lines.
    req = urllib.request.Request(srv.url + "/api/chat", data=json.dumps({"model": "smollm2", "messages": MSGS, "options": GREEDY}).encode())
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.headers["Content-Type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in resp.read().decode().splitlines()]
    assert len(lines) == len(parts) and "".join(x["message"]["content"] for x in lines) == r.message.content


def test_greedy_chat_equals_the_openai_endpoint(srv):
    """The same conversation and sampling through both APIs: Ollama's defaults (top_p 0.9, min_p 0,
    repeat_penalty 1.1 over 64 tokens) given to the OpenAI endpoint by their names there."""
    conv = [{"role": "system", "content": "Answer in one sentence."}, *MSGS]
    ours = client(srv).chat(model="smollm2", messages=conv, options={"temperature": 0, "num_predict": 40}, stream=False)
    oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    theirs = oai.chat.completions.create(model="smollm2", messages=conv, temperature=0, max_tokens=40,
                                         extra_body={"top_p": 0.9, "min_p": 0, "repeat_penalty": 1.1, "repeat_last_n": 64})
    assert ours.message.content == theirs.choices[0].message.content
    assert ours.eval_count == theirs.usage.completion_tokens and ours.prompt_eval_count == theirs.usage.prompt_tokens
    # repeat_penalty 1 through Ollama's options gives OpenAI's plain greedy text.
    plain = client(srv).chat(model="smollm2", messages=conv, options={"temperature": 0, "num_predict": 40, "repeat_penalty": 1},
                             stream=False)
    greedy = oai.chat.completions.create(model="smollm2", messages=conv, temperature=0, max_tokens=40,
                                         extra_body={"top_p": 0.9, "min_p": 0})
    assert plain.message.content == greedy.choices[0].message.content


def test_generate_templated_raw_and_system(srv):
    c = client(srv)
    q = MSGS[0]["content"]
    g = c.generate(model="smollm2", prompt=q, options=GREEDY)
    chat = c.chat(model="smollm2", messages=MSGS, options=GREEDY, stream=False)
    assert g.response == chat.message.content and g.done and g.eval_count == chat.eval_count
    streamed = list(c.generate(model="smollm2", prompt=q, options=GREEDY, stream=True))
    assert "".join(p.response for p in streamed) == g.response and streamed[-1].done
    sys_g = c.generate(model="smollm2", prompt=q, system="Answer in French.", options=GREEDY)
    sys_c = c.chat(model="smollm2", messages=[{"role": "system", "content": "Answer in French."}, *MSGS], options=GREEDY)
    assert sys_g.response == sys_c.message.content
    # raw: the prompt as it is, as /v1/completions takes it.
    raw = c.generate(model="smollm2", prompt="The capital of France is", raw=True, options={**GREEDY, "repeat_penalty": 1})
    oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    comp = oai.completions.create(model="smollm2", prompt="The capital of France is", temperature=0, max_tokens=24,
                                  extra_body={"top_p": 0.9, "min_p": 0})
    assert raw.response == comp.choices[0].text and raw.prompt_eval_count == comp.usage.prompt_tokens
    # context: the conversation's ids (the templated prompt's and the reply's) come back, and a
    # next request puts them before its own templated prompt.
    rendered = post(srv, "/apply-template", {"messages": MSGS})[1]["prompt"]
    assert post(srv, "/detokenize", {"tokens": g.context})[1]["content"] == rendered + g.response
    assert streamed[-1].context == g.context
    nxt = c.generate(model="smollm2", prompt="And of France?", context=g.context, options=GREEDY)
    own = post(srv, "/tokenize", {"content": post(srv, "/apply-template", {"messages": [{"role": "user", "content": "And of France?"}]})[1]["prompt"]})
    assert nxt.prompt_eval_count == len(g.context) + len(own[1]["tokens"]) and nxt.context[: len(g.context)] == g.context
    assert not hasattr(chat, "context") or chat.context is None
    # No prompt: Ollama's "load" reply.
    load = c.generate(model="smollm2")
    assert load.done and load.done_reason == "load" and load.response == ""


def test_format_json_and_schema(srv):
    c = client(srv)
    r = c.chat(model="smollm2", messages=[{"role": "user", "content": "Reply with a JSON object giving the name and the age of a cat."}],
               format="json", options={"temperature": 0, "num_predict": 100})
    assert r.done_reason == "stop"
    assert isinstance(json.loads(r.message.content), dict)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 30}},
              "required": ["name", "age"], "additionalProperties": False}
    for seed in (1, 2):
        r = c.chat(model="smollm2", messages=[{"role": "user", "content": "Make up a pet."}], format=schema,
                   options={"temperature": 1, "seed": seed, "num_predict": 80})
        assert r.done_reason == "stop"
        jsonschema.validate(json.loads(r.message.content), schema)
    g = c.generate(model="smollm2", prompt="Make up a pet.", format=schema, options={"temperature": 0, "num_predict": 80})
    jsonschema.validate(json.loads(g.response), schema)


def test_options_seed_num_predict_stop(srv):
    c = client(srv)
    ask = [{"role": "user", "content": "Write a short poem about the sea."}]
    a = c.chat(model="smollm2", messages=ask, options={"temperature": 1, "seed": 42, "num_predict": 20})
    b = c.chat(model="smollm2", messages=ask, options={"temperature": 1, "seed": 42, "num_predict": 20})
    other = [c.chat(model="smollm2", messages=ask, options={"temperature": 1, "seed": s, "num_predict": 20}).message.content
             for s in (7, 8, 9)]
    assert a.message.content == b.message.content and any(o != a.message.content for o in other)
    five = c.chat(model="smollm2", messages=ask, options={"temperature": 0, "num_predict": 5})
    assert five.eval_count == 5 and five.done_reason == "length"
    full = c.chat(model="smollm2", messages=MSGS, options=GREEDY).message.content
    word = full.split()[1]
    cut = c.chat(model="smollm2", messages=MSGS, options={**GREEDY, "stop": [word]})
    assert cut.message.content == full[: full.index(word)] and cut.done_reason == "stop"
    # Options the server takes from its start (num_ctx, num_thread ...) and keep_alive are accepted.
    c.chat(model="smollm2", messages=MSGS, options={"num_ctx": 2048, "num_thread": 2, "num_predict": 2}, keep_alive="5m")


def test_logprobs_match_the_openai_endpoint(srv):
    c = client(srv)
    r = c.chat(model="smollm2", messages=MSGS, options=GREEDY, logprobs=True, top_logprobs=3)
    # Every generated token, the end-of-generation one included (as the OpenAI endpoint gives them).
    assert len(r.logprobs) == r.eval_count and "".join(x.token for x in r.logprobs).startswith(r.message.content)
    assert all(len(x.top_logprobs) == 3 and x.top_logprobs[0].token == x.token for x in r.logprobs)  # greedy: the top one
    oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    ref = oai.chat.completions.create(model="smollm2", messages=MSGS, temperature=0, max_tokens=24, logprobs=True, top_logprobs=3,
                                      extra_body={"top_p": 0.9, "min_p": 0, "repeat_penalty": 1.1, "repeat_last_n": 64})
    assert [(x.token, x.logprob) for x in r.logprobs] == [(x.token, x.logprob) for x in ref.choices[0].logprobs.content]
    parts = list(c.chat(model="smollm2", messages=MSGS, options=GREEDY, logprobs=True, top_logprobs=3, stream=True))
    assert [(x.token, x.logprob) for p in parts for x in (p.logprobs or [])] == [(x.token, x.logprob) for x in r.logprobs]
    raw = c.generate(model="smollm2", prompt="The capital of France is", raw=True, options=GREEDY, logprobs=True, top_logprobs=2)
    assert len(raw.logprobs) == raw.eval_count and all(len(x.top_logprobs) == 2 for x in raw.logprobs)
    assert c.chat(model="smollm2", messages=MSGS, options={"num_predict": 2}).logprobs is None


def tool_reply(c, seed, stream):
    kw = dict(model="smollm2", messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=[WEATHER],
              options={"temperature": 1, "seed": seed, "num_predict": 64})
    if not stream:
        return c.chat(**kw).message
    content, calls = "", []
    for p in c.chat(**kw, stream=True):
        content += p.message.content or ""
        calls += p.message.tool_calls or []
    return ollama.Message(role="assistant", content=content, tool_calls=calls or None)


def test_tools_calls_and_results(srv):
    c = client(srv)
    called = None
    for seed in range(1, 11):  # auto: SmolLM2 calls with some seeds and answers with others
        m = tool_reply(c, seed, stream=False)
        if m.tool_calls:
            called = (seed, m)
            break
    assert called, "no seed made SmolLM2 call get_weather"
    seed, m = called
    call = m.tool_calls[0]
    assert call.function.name == "get_weather" and isinstance(call.function.arguments, dict)
    assert isinstance(call.function.arguments["city"], str)
    assert "tool_call" not in (m.content or "") and '{"' not in (m.content or "")
    s = tool_reply(c, seed, stream=True)
    assert [(t.function.name, dict(t.function.arguments)) for t in s.tool_calls] == \
        [(t.function.name, dict(t.function.arguments)) for t in m.tool_calls]
    # The call and its result go back in; the reply is text.
    follow = c.chat(model="smollm2", options={"temperature": 0, "num_predict": 24}, messages=[
        {"role": "user", "content": "What is the weather in Paris?"}, m,
        {"role": "tool", "content": "22 C and sunny", "tool_name": "get_weather"}])
    assert follow.done and follow.message.content


def test_thinking():
    """A template that opens a <think> block: the reasoning comes back as message.thinking;
    think=False closes the block, and the reply is content only."""
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
    s = ServerProcess("--parallel", "1", "-c", "1024", "-t", "2", "--chat-template", template)
    try:
        c = ollama.Client(host=s.url)
        opts = {"temperature": 0, "num_predict": 16}
        r = c.chat(model="smollm2", messages=MSGS, options=opts, think=True)
        assert r.message.thinking
        parts = list(c.chat(model="smollm2", messages=MSGS, options=opts, think=True, stream=True))
        assert "".join(p.message.thinking or "" for p in parts) == r.message.thinking
        assert "".join(p.message.content for p in parts) == r.message.content
        g = c.generate(model="smollm2", prompt=MSGS[0]["content"], options=opts)
        assert g.thinking == r.message.thinking
        off = c.chat(model="smollm2", messages=MSGS, options=opts, think=False)
        assert not off.message.thinking and off.message.content
        assert "thinking" in c.show("smollm2").capabilities
    finally:
        assert s.stop() == 0


def test_ps_and_tags_while_the_model_sleeps():
    """--sleep-idle-seconds: /api/ps lists no model while it is unloaded, /api/tags still lists it
    (neither wakes it), and a chat loads it again."""
    s = ServerProcess("--parallel", "1", "-c", "1024", "-t", "2", "--sleep-idle-seconds", "3")  # room for a sanitizer's pace
    try:
        c = ollama.Client(host=s.url)
        assert [m.model for m in c.ps().models] == ["smollm2:latest"] and c.ps().models[0].expires_at
        deadline = time.time() + 30
        while c.ps().models and time.time() < deadline:
            time.sleep(0.2)
        assert c.ps().models == [] and get(s, "/props")["is_sleeping"]
        assert [m.model for m in c.list().models] == ["smollm2:latest"] and get(s, "/props")["is_sleeping"]
        assert c.chat(model="smollm2", messages=MSGS, options={"num_predict": 2}).done
        assert [m.model for m in c.ps().models] == ["smollm2:latest"]
    finally:
        assert s.stop() == 0


def test_a_serve_flag_wins_over_ollamas_defaults_even_at_llamas_value():
    """--repeat-penalty 1 (llama.cpp's default: off) and --top-p 0.95 are the server's choice: a
    request starts from them, not from Ollama's 1.1 and 0.9; the flags not given take Ollama's."""
    s = ServerProcess("--parallel", "1", "-c", "512", "-t", "2", "--repeat-penalty", "1", "--top-p", "0.95")
    try:
        params = ollama.Client(host=s.url).show("smollm2").parameters
        assert "repeat_penalty 1\n" in params and "top_p 0.95\n" in params, params
        assert "min_p 0\n" in params and "repeat_last_n 64" in params, params
    finally:
        assert s.stop() == 0


def test_quantization_level_is_the_file_type():
    """A K-quant mix is named by its general.file_type (Q4_K_M), as Ollama does, not by the
    type most of its bytes are in (Gemma 3's Q8_0 embedding)."""
    gemma = os.path.join(os.path.dirname(MODEL), "gemma3-270m-Q4_K_M.gguf")
    if not os.path.exists(gemma):
        pytest.fail(f"{gemma} missing (scripts/setup.sh installs it)")
    want = gguf.GGUFReader(gemma).fields["general.file_type"].contents()
    assert want == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    s = ServerProcess("--parallel", "1", "-c", "512", "-t", "2", model=gemma)
    try:
        details = ollama.Client(host=s.url).list().models[0].details
        assert details.quantization_level == "Q4_K_M" and details.family == "gemma3", details
    finally:
        assert s.stop() == 0


def test_embed_and_embeddings(srv):
    c = client(srv)
    e = c.embed(model="smollm2", input=["The sky is blue.", "Grass is green."])
    assert len(e.embeddings) == 2 and len(e.embeddings[0]) == 576 and e.prompt_eval_count > 0
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-4 for v in e.embeddings)
    oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    ref = oai.embeddings.create(model="smollm2", input=["The sky is blue.", "Grass is green."])
    for mine, theirs in zip(e.embeddings, ref.data):
        assert mine == pytest.approx(theirs.embedding, abs=1e-6)
    one = c.embed(model="smollm2", input="The sky is blue.").embeddings[0]
    assert one == pytest.approx(e.embeddings[0], abs=1e-6)
    # The older /api/embeddings: one vector, not normalized (as Ollama's), the same direction.
    old = c.embeddings(model="smollm2", prompt="The sky is blue.").embedding
    norm = math.sqrt(sum(x * x for x in old))
    assert abs(norm - 1) > 1e-3 and [x / norm for x in old] == pytest.approx(one, abs=1e-5)
    # Nothing to embed (how clients preload a model): Ollama's 200 with no vectors.
    for body in ({"model": "smollm2"}, {"model": "smollm2", "input": ""}, {"model": "smollm2", "input": []}):
        status, reply = post(srv, "/api/embed", body)
        assert status == 200 and reply["embeddings"] == [] and reply["model"] == "smollm2", (body, reply)
    assert c.embeddings(model="smollm2", prompt="").embedding == []


def test_unknown_model_is_404(srv):
    c = client(srv)
    calls = [lambda: c.chat(model="nope", messages=MSGS), lambda: list(c.chat(model="nope", messages=MSGS, stream=True)),
             lambda: c.generate(model="nope:7b", prompt="Hi"), lambda: c.show("nope"),
             lambda: c.embed(model="nope", input="Hi")]
    for call in calls:
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 404 and 'model "nope' in e.value.error and "not found" in e.value.error


def test_bad_bodies_are_400(srv):
    c = client(srv)
    bad = [lambda: c.chat(model="smollm2", messages=[{"role": "wizard", "content": "Hi"}]),
           lambda: c.chat(model="smollm2", messages=MSGS, options={"temperature": "hot"}),
           lambda: c.chat(model="smollm2", messages=MSGS, options={"top_p": 2}),
           lambda: c.chat(model="smollm2", messages=MSGS, think=True),  # SmolLM2's template does not think
           lambda: c.generate(model="smollm2", prompt="Hi", format={"type": "object", "patternProperties": {"a": {}}})]
    for call in bad:
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 400 and e.value.error, e.value
    for body in (b"{not json", {"messages": MSGS}, {"model": "smollm2", "messages": MSGS, "format": 5},
                 {"model": "smollm2", "messages": "Hi"}, {"model": "smollm2", "prompt": "Hi", "template": "{{ .Prompt }}"},
                 {"model": "smollm2", "messages": MSGS, "think": "banana"}):  # not a level Ollama knows
        path = "/api/generate" if isinstance(body, dict) and "prompt" in body else "/api/chat"
        status, reply = post(srv, path, body)
        assert status == 400 and isinstance(reply["error"], str) and set(reply) == {"error"}, (body, reply)


def test_the_store_needs_a_pool(srv):
    """One MODEL: pull, copy and delete are 501s saying so (test_ollama_store.py: a pool's)."""
    c = client(srv)
    for call in (lambda: c.pull("smollm2"), lambda: c.copy("smollm2", "other"), lambda: c.delete("smollm2")):
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 501 and "no MODEL" in e.value.error


def test_ollama_node_client(srv):
    """ollama-node.test.mjs: the official `ollama` npm package against the same server."""
    run_node_test("ollama-node.test.mjs", srv.url, "ollama", "OLLAMA_NODE_MODULES")
