"""Speculative decoding in `minfer serve`: the same completions with and without drafting (a
table of prompts, temperatures, seeds, penalties, stops, json_object, logprobs), alone and with
four clients at once (the slots' drafts verified in one batch), streaming and not; llama-server's
per-request `speculative` settings and `timings.draft_n` / `draft_n_accepted`; the Prometheus
counters; bad settings refused with a 400; a draft model of another vocabulary refused at start.

The draft model is SmolLM2 itself (greedy: every draft must be accepted) and n-gram lookup, at
fixed lengths; the server of the context-limit test drafts at the adaptive length (the default).
"""
import concurrent.futures
import json
import os
import subprocess
import tempfile

import pytest
import requests

from conftest import BIN, MODEL, ServerProcess, metric

MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "build/bin/minfer-make-test-model")
QWEN_VOCAB = os.environ.get("MINFER_QWEN_VOCAB", ".deps/llama.cpp/models/ggml-vocab-qwen2.gguf")


@pytest.fixture(scope="module")
def spec_server():
    # Fixed lengths: a model drafting for itself costs as much as the target, so the adaptive
    # length (the default) would soon stop drafting, and this table is about verifying drafts.
    s = ServerProcess("--parallel", "4", "-c", "4096", "-t", "2", "--spec-draft", MODEL, "--spec-ngram", "--spec-draft-fixed")
    yield s
    rc = s.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {s.read_log()[-2000:]}"


def post(server, body, path=None):
    path = path or path_of(body)
    r = requests.post(server.url + path, json=body, timeout=300)
    return r


def complete(server, body, path=None):
    r = post(server, body, path or path_of(body))
    assert r.status_code == 200, r.text
    return r.json()


def answer(j):
    c = j["choices"][0]
    text = c["text"] if "text" in c else c["message"]["content"]
    lp = c.get("logprobs")
    tokens = None
    if lp:
        tokens = lp["tokens"] if "tokens" in lp else [t["token"] for t in lp["content"]]
    return text, c["finish_reason"], j["usage"]["completion_tokens"], tokens


def chat(text):
    return [{"role": "user", "content": text}]


# Each case is a request body; "messages" ones go to /v1/chat/completions.
CASES = [
    {"messages": chat("Copy this line exactly: the cat sat on the mat, the dog sat on the log, the cat sat on the mat."),
     "max_tokens": 48, "temperature": 0},
    {"prompt": "Once upon a time, there was a", "max_tokens": 40, "temperature": 0.9, "seed": 3},
    {"prompt": "Once upon a time, there was a", "max_tokens": 40, "temperature": 0.9, "seed": 4, "top_k": 0, "min_p": 0.1},
    {"messages": chat("List the planets of the solar system."), "max_tokens": 40, "temperature": 0.7, "seed": 5,
     "presence_penalty": 0.5, "frequency_penalty": 0.3, "repeat_penalty": 1.2},
    {"messages": chat("Rename x to total in this code:\nint x = 0;\nfor (int i = 0; i < n; ++i) x += v[i];"),
     "max_tokens": 48, "temperature": 0, "stop": ["}"]},
    {"prompt": "The capital of France is", "max_tokens": 30, "temperature": 0.5, "seed": 9, "logprobs": 2},
]


def path_of(body):
    return "/v1/chat/completions" if "messages" in body else "/v1/completions"


MODES = [{"type": "draft+ngram"}, {"type": "draft", "n_max": 8}, {"type": "ngram", "n_max": 6, "n_min": 1},
         {"type": "draft", "n_max": 2, "p_min": 0.5}]


def test_same_completions_with_and_without_drafting(spec_server):
    n = 0
    for case in CASES:
        plain = answer(complete(spec_server, {**case, "speculative": {"type": "none"}}))
        assert plain[2] > 8, (case, plain)  # a real reply, not an immediate end
        for mode in MODES:
            got = complete(spec_server, {**case, "speculative": mode})
            assert answer(got) == plain, (case, mode)
            n += 1
    print(f"[identity] {n} speculative completions identical to plain decoding")


def test_chat_json_object_and_flat_keys(spec_server):
    body = {"messages": [{"role": "user", "content": "Give a JSON object with a name and an age."}],
            "response_format": {"type": "json_object"}, "max_tokens": 60, "temperature": 0.8, "seed": 2}
    plain = answer(complete(spec_server, {**body, "speculative.type": "none"}, "/v1/chat/completions"))
    got = answer(complete(spec_server, {**body, "speculative.n_max": 6, "speculative.p_min": 0.0},
                          "/v1/chat/completions"))
    assert got == plain
    assert got[0].lstrip().startswith("{")


def test_self_draft_greedy_accepts_everything(spec_server):
    j = complete(spec_server, {"prompt": "Once upon a time, there was a", "max_tokens": 64, "temperature": 0,
                               "speculative": {"type": "draft", "n_max": 4}})
    t = j["timings"]
    assert t["predicted_n"] == 64 and t["draft_n"] > 20, t
    assert t["draft_n_accepted"] == t["draft_n"], t
    assert t["predicted_n"] == j["usage"]["completion_tokens"]
    # Off: no drafts.
    j = complete(spec_server, {"prompt": "Once upon a time, there was a", "max_tokens": 16, "temperature": 0,
                               "speculative": {"type": "none"}})
    assert j["timings"]["draft_n"] == 0


def test_concurrent_clients_match_their_solo_runs(spec_server):
    bodies = []
    for i, case in enumerate(CASES):
        for k, mode in enumerate(MODES[:2]):
            bodies.append({**case, "speculative": mode, "seed": 100 + i * 7 + k})
    solo = [answer(complete(spec_server, {**b, "speculative": {"type": "none"}})) for b in bodies]
    drafted0 = metric(spec_server.url, "minfer_draft_tokens_total")
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda b: answer(complete(spec_server, b)), bodies * 2))
    assert got == solo * 2
    assert metric(spec_server.url, "minfer_draft_tokens_total") > drafted0
    assert metric(spec_server.url, "minfer_draft_tokens_accepted_total") > 0


def test_streaming_matches_and_ends_with_timings(spec_server):
    body = {"prompt": "Once upon a time, there was a", "max_tokens": 40, "temperature": 0.6, "seed": 8}
    plain = answer(complete(spec_server, {**body, "speculative": {"type": "none"}}))[0]
    text, last = "", None
    with requests.post(spec_server.url + "/v1/completions", json={**body, "stream": True}, stream=True,
                       timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            c = json.loads(line[6:])
            text += c["choices"][0]["text"]
            if c["choices"][0]["finish_reason"]:
                last = c
    assert text == plain
    assert last and last["timings"]["draft_n"] > 0


@pytest.mark.parametrize("spec,param", [
    ({"type": "bogus"}, "speculative.type"),
    ({"n_max": 0}, "speculative.n_max"),
    ({"n_max": 100}, "speculative.n_max"),
    ({"p_min": 2}, "speculative.p_min"),
    ({"n_maxx": 3}, "speculative.n_maxx"),
    ("fast", "speculative"),
])
def test_bad_settings_are_400(spec_server, spec, param):
    r = post(spec_server, {"prompt": "hi", "max_tokens": 4, "speculative": spec})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_draft_type_needs_a_draft_model(server):
    r = post(server, {"prompt": "hi", "max_tokens": 4, "speculative": {"type": "draft"}})
    assert r.status_code == 400 and "--spec-draft" in r.json()["error"]["message"]
    # Bad numbers are refused even where the server would not speculate.
    for bad in ({"n_max": "x"}, {"n_max": 999}, {"p_min": -1}):
        r = post(server, {"prompt": "hi", "max_tokens": 4, "speculative": bad})
        assert r.status_code == 400, (bad, r.text)
    # n-gram needs nothing: a plain server drafts when asked, with the same output.
    body = {**CASES[0], "max_tokens": 24}
    a = complete(server, body)
    b = complete(server, {**body, "speculative": {"type": "ngram"}})
    assert answer(a) == answer(b)
    assert b["timings"]["draft_n"] > 0


def test_context_fills_up_inside_a_run():
    s = ServerProcess("--parallel", "2", "-c", "192", "-t", "2", "--spec-draft", MODEL, "--spec-ngram")
    try:
        # ignore_eos: the reply runs into the end of the context whatever the model would say.
        body = {"messages": chat("Count from one to fifty in words."), "temperature": 0, "n_predict": -1, "ignore_eos": True}
        plain = complete(s, {**body, "speculative": {"type": "none"}})
        got = complete(s, {**body, "speculative": {"type": "draft+ngram", "n_max": 8}})
        assert answer(got) == answer(plain)
        assert plain["choices"][0]["finish_reason"] == "length"
        assert got["choices"][0]["finish_reason"] == "length"
        assert got["usage"]["prompt_tokens"] + got["usage"]["completion_tokens"] >= 95
    finally:
        assert s.stop() == 0


def test_draft_with_another_vocabulary_is_refused_at_start():
    assert os.path.exists(MAKE_MODEL) and os.path.exists(QWEN_VOCAB), (MAKE_MODEL, QWEN_VOCAB)
    with tempfile.TemporaryDirectory() as d:
        other = os.path.join(d, "qwen-vocab.gguf")
        subprocess.run([MAKE_MODEL, "--preset", "tiny", "--vocab-from", QWEN_VOCAB, "--out", other], check=True,
                       capture_output=True)
        r = subprocess.run([BIN, "serve", MODEL, "--port", "65000", "--spec-draft", other], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0
        assert "cannot draft for this model" in r.stderr and "not the same vocabulary" in r.stderr, r.stderr
        r = subprocess.run([BIN, MODEL, "hi", "-n", "4", "--spec-draft", other], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0 and "not the same vocabulary" in r.stderr, r.stderr


def test_native_completion_tokens_and_stream(spec_server):
    """llama-server's /completion: the generated ids (return_tokens), stop_type, tokens_predicted
    and timings; the same with and without drafting, streamed or not."""
    body = {"prompt": "Once upon a time, there was a", "n_predict": 32, "temperature": 0.8, "top_k": 5, "seed": 4242,
            "return_tokens": True}
    plain = complete(spec_server, {**body, "speculative.type": "none"}, "/completion")
    got = complete(spec_server, body, "/completion")
    assert plain["tokens"] and got["tokens"] == plain["tokens"] and got["content"] == plain["content"]
    assert got["tokens_predicted"] == len(got["tokens"]) == 32 and got["stop_type"] == "limit"
    assert got["timings"]["draft_n"] > 0 and plain["timings"]["draft_n"] == 0
    eos = complete(spec_server, {"prompt": "Once upon a time", "n_predict": 400, "temperature": 0}, "/completion")
    assert eos["stop_type"] in ("eos", "limit")
    ign = complete(spec_server, {"prompt": "Respond with only: OK", "n_predict": 24, "temperature": 0, "ignore_eos": True},
                   "/completion")
    assert ign["tokens_predicted"] == 24 and ign["stop_type"] == "limit"
    text, tokens, last = "", [], None
    with requests.post(spec_server.url + "/completion", json={**body, "stream": True}, stream=True, timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith(b"data: "):
                continue
            c = json.loads(line[6:])
            text += c["content"]
            tokens += c["tokens"]
            if c["stop"]:
                last = c
    assert text == plain["content"] and tokens == plain["tokens"]
    assert last and last["timings"]["draft_n"] > 0 and last["tokens_predicted"] == 32
