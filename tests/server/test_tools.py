"""OpenAI function calling in `minfer serve`: `tools`, `tool_choice` (auto, none, required, a
named function) and `parallel_tool_calls` through the official `openai` client, streamed and
not, over each call syntax the server derives from a chat template (generic: SmolLM2's own
ChatML template; hermes: Qwen2.5, Qwen3, Hermes 3; llama3: Llama 3.1, 3.3; mistral: Mistral
Nemo), on SmolLM2 and on a random-weight Qwen2-shaped model with the real Qwen tokenizer.
Every call's arguments are checked by the jsonschema package against the tool's own
`parameters` schema, not by minfer; a streamed reply is reassembled from its deltas and must
equal the non-streamed one. Also: a second turn carrying the calls and the tool's result back,
llama-server's lazy grammars (`grammar_lazy` + `grammar_triggers`, the reply compared with the
model's own unconstrained greedy text), and the 400s for bad tool fields, before any slot runs.

Environment as conftest.py, plus MINFER_MAKE_MODEL and MINFER_QWEN_VOCAB (the random model).
"""
import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import jsonschema
import openai
import pytest

from conftest import BIN, MODEL, ServerProcess, metric, post_json

MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "build/bin/minfer-make-test-model")
QWEN_VOCAB = os.environ.get("MINFER_QWEN_VOCAB", ".deps/llama.cpp/models/ggml-vocab-qwen2.gguf")
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".deps", "llama.cpp", "models", "templates")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "maxLength": 30, "description": "the city's name"},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a time zone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 30}}, "required": ["timezone"]}}}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, CLOCK)}

# The call markup of each syntax: never in a reply's content.
MARKUP = ("<tool_call>", "</tool_call>", "[TOOL_CALLS]", '{"tool_calls"', '{"response"')

# name -> (template file or None for the model's own, expected syntax, random Qwen model?)
SETUPS = {
    "generic": (None, "generic", False),
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes", False),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "hermes", False),
    "hermes3": ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", False),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3", False),
    "llama3.3": ("meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3", False),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral", False),
    "qwen-random": ("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes", True),
}
# The random model writes long strings: room for a call at temperature 1.
MAX_TOKENS = {"qwen-random": 300}


@pytest.fixture(scope="module")
def qwen_model(tmp_path_factory):
    assert os.path.exists(MAKE_MODEL) and os.path.exists(QWEN_VOCAB), (MAKE_MODEL, QWEN_VOCAB)
    path = str(tmp_path_factory.mktemp("qwen") / "qwen-random.gguf")
    subprocess.run([MAKE_MODEL, "--preset", "tiny", "--arch", "qwen2", "--vocab-from", QWEN_VOCAB, "--ctx", "4096",
                    "--out", path], check=True, capture_output=True)
    return path


class Setup:
    def __init__(self, name, server, syntax):
        self.name, self.server, self.syntax = name, server, syntax
        self.client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300)
        self.max_tokens = MAX_TOKENS.get(name, 200)
        self.first = None  # the forced call's reply (first_turn), reused by the multi-turn tests


def start(name, qwen_model=None):
    template, syntax, random_model = SETUPS[name]
    extra = ["--chat-template-file", os.path.join(TEMPLATES, template)] if template else []
    s = ServerProcess("--parallel", "2", "-c", "4096", "-t", "2", *extra, model=qwen_model if random_model else None)
    return Setup(name, s, syntax)


@pytest.fixture(scope="module")
def setup(request):
    """One server per setup name (tests parametrize it indirectly), kept for the module."""
    qwen = request.getfixturevalue("qwen_model") if SETUPS[request.param][2] else None
    st = start(request.param, qwen)
    yield st
    rc = st.server.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {st.server.read_log()[-2000:]}"


# The five syntaxes x models that every test covers; the other templates get the tests that
# touch the template (the syntax it is read as, a forced call, the history of a tool turn).
MAIN = ["generic", "qwen2.5", "llama3.1", "mistral-nemo", "qwen-random"]
ALL = list(SETUPS)
on_main = pytest.mark.parametrize("setup", MAIN, indirect=True)
on_all = pytest.mark.parametrize("setup", ALL, indirect=True)
on_generic = pytest.mark.parametrize("setup", ["generic"], indirect=True)


def ask(content):
    return [{"role": "user", "content": content}]


def create(st, **kw):
    kw.setdefault("max_tokens", st.max_tokens)
    return st.client.chat.completions.create(model="smollm2", **kw)


def calls_of(message):
    return [(t.function.name, t.function.arguments) for t in message.tool_calls or []]


def check_call(t, names=None):
    """One tool call as the client parsed it: shape, name, arguments valid for its schema."""
    assert t.type == "function" and t.id, t
    assert t.function.name in (names or SCHEMAS), t
    jsonschema.validate(json.loads(t.function.arguments), SCHEMAS[t.function.name])


def check_ids(st, calls):
    ids = [t.id for t in calls]
    assert all(ids) and len(set(ids)) == len(ids), ids
    if st.syntax == "mistral":  # Mistral's templates refuse other ids
        assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids), ids


def stream(st, **kw):
    """A streamed reply reassembled: (content, [(id, name, arguments)], finish_reason)."""
    kw.setdefault("max_tokens", st.max_tokens)
    content, calls, finish = "", {}, None
    for ch in st.client.chat.completions.create(model="smollm2", stream=True, **kw):
        if not ch.choices:
            continue
        c = ch.choices[0]
        d = c.delta
        content += d.content or ""
        for t in d.tool_calls or []:
            if t.index not in calls:  # a call's first delta: id, type, name, empty arguments
                assert t.index == len(calls), (t, calls)
                assert t.id and t.type == "function" and t.function.name and not t.function.arguments, t
                calls[t.index] = [t.id, t.function.name, ""]
            else:  # then only argument bytes
                assert not t.id and not t.function.name and t.function.arguments, t
                calls[t.index][2] += t.function.arguments
        if c.finish_reason:
            assert finish is None, "two finish reasons"
            finish = c.finish_reason
    return content, [tuple(v) for _, v in sorted(calls.items())], finish


def no_markup(content):
    for m in MARKUP:
        assert m not in (content or ""), content


WEATHER_Q = ask("What is the weather in Paris?")
TWO_CITIES = ask("What is the weather in Paris and in Rome, and what time is it there?")


REQUIRED = dict(messages=WEATHER_Q, tools=[WEATHER], tool_choice="required", temperature=0, seed=1)


def first_turn(st):
    """The reply to REQUIRED, made once per server."""
    if st.first is None:
        st.first = create(st, **REQUIRED)
    return st.first


@on_all
def test_startup_names_the_syntax(setup):
    assert f"[server] tool calls: {setup.syntax} syntax" in setup.server.read_log()


@on_all
def test_required_call_stream_and_not(setup):
    r = first_turn(setup)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.content in (None, ""), c.message
    assert len(c.message.tool_calls) == 1, c.message
    check_call(c.message.tool_calls[0], ["get_weather"])
    check_ids(setup, c.message.tool_calls)
    content, calls, finish = stream(setup, **REQUIRED)
    assert content == "" and finish == "tool_calls", (content, finish)
    assert [(n, a) for _, n, a in calls] == calls_of(c.message)
    assert calls[0][0] != c.message.tool_calls[0].id  # a fresh id per reply
    if setup.syntax == "mistral":
        assert re.fullmatch(r"[A-Za-z0-9]{9}", calls[0][0]), calls


@on_main
def test_named_tool_choice(setup):
    for name in ("get_time", "get_weather"):
        for seed in (1, 2, 3):
            r = create(setup, messages=TWO_CITIES, tools=[WEATHER, CLOCK], temperature=1, seed=seed,
                       tool_choice={"type": "function", "function": {"name": name}})
            c = r.choices[0]
            assert c.finish_reason == "tool_calls" and c.message.content in (None, ""), c
            assert len(c.message.tool_calls) == 1, c.message
            check_call(c.message.tool_calls[0], [name])


@on_main
def test_parallel_tool_calls(setup):
    counts, ended = [], 0
    for seed in (0, 1, 2, 3):
        r = create(setup, messages=TWO_CITIES, tools=[WEATHER, CLOCK], tool_choice="required", parallel_tool_calls=True,
                   temperature=0.8, seed=seed, max_tokens=300)
        c = r.choices[0]
        assert c.finish_reason in ("tool_calls", "length") and c.message.content in (None, ""), c
        calls = c.message.tool_calls
        # Cut by max_tokens (a small model may go on calling): all but the last call are whole.
        for t in calls if c.finish_reason == "tool_calls" else calls[:-1]:
            check_call(t)
        check_ids(setup, calls)
        counts.append(len(calls) if c.finish_reason == "tool_calls" else len(calls) - 1)
        ended += c.finish_reason == "tool_calls"
        r = create(setup, messages=TWO_CITIES, tools=[WEATHER, CLOCK], tool_choice="required", parallel_tool_calls=False,
                   temperature=1, seed=seed)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1, c
        check_call(c.message.tool_calls[0])
    assert min(counts) >= 1, counts  # at least one whole call in every reply
    if setup.name != "qwen-random":  # random weights may go on calling until max_tokens
        assert ended >= 2, (ended, counts)
    if setup.syntax == "llama3":  # one call per reply in Llama 3's format
        assert counts == [1] * 4 and ended == 4, counts
    elif setup.name != "qwen-random":  # SmolLM2 asks for both cities with some seed
        assert max(counts) >= 2, counts


@on_main
def test_tool_choice_none_is_a_plain_reply(setup):
    plain = create(setup, messages=WEATHER_Q, temperature=0, max_tokens=24)
    r = create(setup, messages=WEATHER_Q, tools=[WEATHER, CLOCK], tool_choice="none", temperature=0, max_tokens=24)
    c = r.choices[0]
    assert not c.message.tool_calls and c.finish_reason != "tool_calls", c
    # No tools in the prompt, no grammar: the very reply of a request without tools.
    assert r.usage.prompt_tokens == plain.usage.prompt_tokens
    assert c.message.content == plain.choices[0].message.content
    with_tools = create(setup, messages=WEATHER_Q, tools=[WEATHER, CLOCK], tool_choice="required", max_tokens=1)
    assert with_tools.usage.prompt_tokens > r.usage.prompt_tokens


@on_main
def test_auto_stream_equals_non_stream(setup):
    kinds = set()
    for seed in range(4):
        kw = dict(messages=TWO_CITIES if seed % 2 else WEATHER_Q, tools=[WEATHER, CLOCK], tool_choice="auto",
                  temperature=1 if seed else 0, seed=seed, max_tokens=100)
        r = create(setup, **kw)
        c = r.choices[0]
        no_markup(c.message.content)
        if setup.syntax == "generic":  # constrained from the start: prose or calls, never the raw JSON
            assert not (c.message.content or "").lstrip().startswith(("{\"tool_calls\"", "{\"response\"")), c.message
        if c.message.tool_calls:
            kinds.add("calls")
            assert c.finish_reason in ("tool_calls", "length"), c
            for t in c.message.tool_calls if c.finish_reason == "tool_calls" else ():
                check_call(t)
            check_ids(setup, c.message.tool_calls)
        else:
            kinds.add("content")
            assert c.finish_reason in ("stop", "length"), c
        content, calls, finish = stream(setup, **kw)
        assert content == (c.message.content or "") and finish == c.finish_reason, (content, finish, c)
        assert [(n, a) for _, n, a in calls] == calls_of(c.message)
    if setup.syntax == "generic":
        assert kinds == {"calls", "content"}, kinds  # auto: SmolLM2 does both over these seeds


@on_all
def test_tool_result_turn(setup):
    first = first_turn(setup)
    m = first.choices[0].message
    history = WEATHER_Q + [m, {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "22 C"}]
    r = create(setup, messages=history, tools=[WEATHER], temperature=0, max_tokens=16)
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length", "tool_calls"), c
    assert r.usage.prompt_tokens > first.usage.prompt_tokens, (first.usage, r.usage)
    no_markup(c.message.content)
    # The tool's result is in the prompt: a longer one makes a longer prompt.
    longer = history[:-1] + [{**history[-1], "content": "22 C, sunny, light wind from the west"}]
    r2 = create(setup, messages=longer, tools=[WEATHER], temperature=0, max_tokens=1)
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens, (r.usage, r2.usage)
    # The message as a dict with arguments as a string (what a client stores and sends back).
    as_dict = {"role": "assistant", "content": None,
               "tool_calls": [{"id": t.id, "type": "function", "function": {"name": t.function.name, "arguments": t.function.arguments}}
                              for t in m.tool_calls]}
    r3 = create(setup, messages=WEATHER_Q + [as_dict, history[-1]], tools=[WEATHER], temperature=0, max_tokens=16)
    assert r3.usage.prompt_tokens == r.usage.prompt_tokens and r3.choices[0].message.content == c.message.content


@on_all
def test_tool_result_turn_without_tools(setup):
    """The last turn of a tool conversation often drops `tools`: the history still renders."""
    if setup.name == "hermes3":
        pytest.skip("Hermes 3's tool_use template iterates `tools` unconditionally: it cannot render without them")
    first = first_turn(setup)
    m = first.choices[0].message
    history = WEATHER_Q + [m, {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "22 C"}]
    r = create(setup, messages=history, temperature=0, max_tokens=16)
    assert r.choices[0].finish_reason in ("stop", "length") and not r.choices[0].message.tool_calls, r
    longer = history[:-1] + [{**history[-1], "content": "22 C, sunny, light wind from the west"}]
    r2 = create(setup, messages=longer, temperature=0, max_tokens=1)
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens, (r.usage, r2.usage)


# Lazy grammars (llama-server's grammar_lazy / grammar_triggers) on the generic server.

def sse(st, path, body):
    req = urllib.request.Request(st.server.url + path, data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200
        events = [json.loads(line[6:]) for line in r.read().decode().splitlines()
                  if line.startswith("data: ") and line != "data: [DONE]"]
    return events


def lazy(word):
    return {"grammar": f'root ::= "{word}" " is lovely."', "grammar_lazy": True,
            "grammar_triggers": [{"type": 1, "value": word}]}


@on_generic
def test_lazy_grammar_on_completions(setup):
    base = {"prompt": "The capital of France is", "max_tokens": 40, "temperature": 0}
    st, free = post_json(setup.server.url, "/v1/completions", base)
    assert st == 200, free
    free = free["choices"][0]["text"]
    word, off = whole_word_trigger(free)  # one token with its leading space, past the start
    want = free[:off] + word + " is lovely."
    st, got = post_json(setup.server.url, "/v1/completions", {**base, **lazy(word)})
    assert st == 200, got
    assert got["choices"][0]["text"] == want and got["choices"][0]["finish_reason"] == "stop", got
    events = sse(setup, "/v1/completions", {**base, **lazy(word)})
    assert "".join(e["choices"][0]["text"] for e in events) == want
    # Not lazy: constrained from the first token.
    body = {**base, **lazy(word)}
    del body["grammar_lazy"], body["grammar_triggers"]
    st, eager = post_json(setup.server.url, "/v1/completions", body)
    assert st == 200 and eager["choices"][0]["text"] == word + " is lovely." != want, eager
    # A trigger word that never appears: the free text, untouched.
    st, never = post_json(setup.server.url, "/v1/completions", {**base, **lazy("Zanzibar")})
    assert st == 200 and never["choices"][0]["text"] == free, never
    # A trigger ending inside a token (the word's token goes on past its first letters): an error.
    st, mid = post_json(setup.server.url, "/v1/completions", {**base, **lazy(word[:-1])})
    assert "error" in mid and "trigger" in mid["error"]["message"], (st, mid)


def whole_word_trigger(text):
    """(word, offset): the first word past the start of `text` (of 4 letters or more if any, else 2)
    that SmolLM2's tokenizer keeps as one token with its leading space, at its first occurrence. The greedy reply of a 135M model is not
    the same text on every machine (this prompt gets "Paris ..." on one and French on another, in
    llama.cpp and here alike), so the trigger comes from the reply itself."""
    ids = json.loads(subprocess.run([BIN, "tokenize", MODEL, text, "--json", "--no-special"], capture_output=True,
                                    text=True, check=True).stdout)
    lines = "".join(json.dumps([i]) + "\n" for i in ids)
    pieces = [json.loads(l) for l in subprocess.run([BIN, "detokenize", MODEL, "--jsonl"], input=lines, capture_output=True,
                                                     text=True, check=True).stdout.splitlines()]
    assert "".join(pieces) == text
    for shortest in (4, 2):  # a longer word if there is one
        off = 0
        for i, p in enumerate(pieces):
            if i > 0 and re.fullmatch(r" [A-Za-z]{%d,}" % shortest, p) and text.index(p[1:]) == off + 1:
                return p[1:], off + 1
            off += len(p)
    raise AssertionError(f"no whole-word token in {text!r}")


@on_generic
def test_lazy_grammar_on_chat(setup):
    base = {"messages": ask("What is the capital of France?"), "max_tokens": 30, "temperature": 0}
    st, free = post_json(setup.server.url, "/v1/chat/completions", base)
    assert st == 200, free
    free = free["choices"][0]["message"]["content"]
    word, off = whole_word_trigger(free)
    st, got = post_json(setup.server.url, "/v1/chat/completions", {**base, **lazy(word)})
    assert st == 200, got
    assert got["choices"][0]["message"]["content"] == free[:off] + word + " is lovely.", (free, got)


# 400s before any slot.

def fn(**f):
    return {"type": "function", "function": {"name": "f", **f}}


BAD = [
    ({"tools": WEATHER}, "tools"),
    ({"tools": {}}, "tools"),
    ({"tools": [{"type": "retrieval", "function": WEATHER["function"]}]}, "tools[0].type"),
    ({"tools": [CLOCK, {"function": WEATHER["function"]}]}, "tools[1].type"),
    ({"tools": [{"type": "function"}]}, "tools[0].function"),
    ({"tools": [fn(name="get weather")]}, "tools[0].function.name"),
    ({"tools": [fn(name="")]}, "tools[0].function.name"),
    ({"tools": [fn(name="x" * 65)]}, "tools[0].function.name"),
    ({"tools": [fn(name="naïve")]}, "tools[0].function.name"),
    ({"tools": [WEATHER, CLOCK, WEATHER]}, "tools[2].function.name"),
    ({"tools": [fn(parameters=[])]}, "tools[0].function.parameters"),
    ({"tools": [fn(parameters="object")]}, "tools[0].function.parameters"),
    ({"tools": [fn(parameters={"not": {}})]}, "tools[0].function.parameters"),
    ({"tools": [CLOCK, fn(parameters={"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}})]},
     "tools[1].function.parameters"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"tool_choice": "required", "tools": []}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function"}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": 1}, "tool_choice"),
    ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"tools": [WEATHER], "parallel_tool_calls": 1}, "parallel_tool_calls"),
    ({"tools": [WEATHER], "response_format": {"type": "json_object"}}, "tools"),
    ({"tools": [WEATHER], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string"}}}},
     "tools"),
    ({"tools": [WEATHER], "grammar": 'root ::= "a"'}, "tools"),
    ({"tools": [WEATHER], "tool_choice": "required", "json_schema": {"type": "string"}}, "tools"),
    ({"grammar": 'root ::= "a"', "grammar_lazy": True}, "grammar_triggers"),
    ({"grammar": 'root ::= "a"', "grammar_lazy": True, "grammar_triggers": []}, "grammar_triggers"),
    ({"grammar": 'root ::= "a"', "grammar_lazy": True, "grammar_triggers": [{"type": 2, "value": "a.*"}]},
     "grammar_triggers[0].type"),
    ({"grammar": 'root ::= "a"', "grammar_lazy": True, "grammar_triggers": [{"type": 1, "value": "a"}, {"type": 3, "value": "b"}]},
     "grammar_triggers[1].type"),
]


@on_generic
@pytest.mark.parametrize("body,param", BAD, ids=[p + ":" + json.dumps(b)[:40] for b, p in BAD])
def test_bad_tool_fields_are_400_before_any_slot(setup, body, param):
    steps0 = metric(setup.server.url, "minfer_batch_steps_total")
    st, out = post_json(setup.server.url, "/v1/chat/completions", {"messages": ask("Hi"), "max_tokens": 4, **body})
    assert st == 400, out
    err = out["error"]
    assert err["type"] == "invalid_request_error" and err["message"] and "code" in err, out
    assert err["param"] == param, out
    if param.endswith(".parameters") and isinstance(body["tools"][-1]["function"]["parameters"], dict):
        assert param in err["message"], out  # the message names the tool and the keyword's place
    with pytest.raises(openai.BadRequestError):
        setup.client.chat.completions.create(model="smollm2", messages=ask("Hi"), max_tokens=4, extra_body=body)
    if "grammar_lazy" in body:  # the same on /v1/completions
        st, out = post_json(setup.server.url, "/v1/completions", {"prompt": "Hi", "max_tokens": 4, **body})
        assert st == 400 and out["error"]["param"] == param, out
    assert metric(setup.server.url, "minfer_batch_steps_total") == steps0  # no slot ran


@on_generic
def test_allowed_combinations(setup):
    """Not 400: JSON output with tools when tool_choice is none; a 64-character name; no tools."""
    r = create(setup, messages=ask("Describe a cat as JSON."), tools=[WEATHER], tool_choice="none",
               response_format={"type": "json_object"}, max_tokens=40, seed=1)
    assert not r.choices[0].message.tool_calls
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:
        assert r.choices[0].message.content.lstrip().startswith("{"), r
    long_name = {"type": "function", "function": {**WEATHER["function"], "name": "w" * 64}}
    r = create(setup, messages=WEATHER_Q, tools=[long_name], tool_choice="required", temperature=0, max_tokens=80)
    assert r.choices[0].message.tool_calls[0].function.name == "w" * 64
    r = create(setup, messages=WEATHER_Q, tools=[], max_tokens=4)
    assert not r.choices[0].message.tool_calls
