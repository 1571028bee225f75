"""llama-server's native endpoints on `minfer serve` (docs/server-api.md#llama-server-endpoints):
/tokenize against llama.cpp's own tokenizer, /apply-template against Python jinja2 as
transformers configures it, /completion's fields, /props and /slots, the context-size error,
/metrics under llama-server's names, CORS and the API-key headers, llama-server's flags."""
import json
import math
import os
import subprocess
import time
import urllib.error
import urllib.request

import jinja2
import jinja2.ext
import jinja2.sandbox
import pytest

from conftest import MODEL, ServerProcess

ORACLE = os.environ.get("MINFER_LLAMA_ORACLE", "")


def call(url, path, body=None, headers=None, method=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method or ("POST" if data else "GET"),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read().decode()
            return r.status, (json.loads(raw) if raw.strip().startswith(("{", "[")) else raw), dict(r.headers)
    except urllib.error.HTTPError as e:
        raw = e.read().decode()
        return e.code, (json.loads(raw) if raw.strip().startswith("{") else raw), dict(e.headers)


def stream(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


@pytest.fixture(scope="module")
def srv():
    s = ServerProcess("--parallel", "2", "-c", "2048", "-t", "2", "--slots", "--seed", "42", "--temp", "0")
    yield s
    assert s.stop() == 0


def test_tokenize_matches_llama_cpp(srv):
    assert os.path.isfile(ORACLE), f"MINFER_LLAMA_ORACLE={ORACLE!r} is not built"
    for text in ["What is the capital of France?", "unicode 媽 and emoji 🤗 <|im_start|>", "  leading spaces\n\ttabs"]:
        st, body, _ = call(srv.url, "/tokenize", {"content": text})
        assert st == 200, body
        ref = subprocess.run([ORACLE, "tokenize", MODEL, text, "--special"], capture_output=True, text=True, timeout=120)
        assert ref.returncode == 0, ref.stderr
        assert body["tokens"] == json.loads(ref.stdout.strip().splitlines()[-1])["tokens"], text
        # Pieces concatenate to the text; a piece that is not whole UTF-8 comes as its bytes.
        st, pieces, _ = call(srv.url, "/tokenize", {"content": text, "with_pieces": True})
        assert [p["id"] for p in pieces["tokens"]] == body["tokens"]
        raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces["tokens"])
        assert raw.decode() == text
        st, detok, _ = call(srv.url, "/detokenize", {"tokens": body["tokens"]})
        assert st == 200 and detok["content"] == text
    st, body, _ = call(srv.url, "/tokenize", {"content": "hi", "with_pieces": "yes"})
    assert st == 400 and body["error"]["type"] == "invalid_request_error"
    st, body, _ = call(srv.url, "/detokenize", {"tokens": [1, 10 ** 9]})
    assert st == 400


def jinja2_render(template, messages, add_generation_prompt):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token="<|im_start|>", eos_token="<|im_end|>", enable_thinking=True)


def test_apply_template_matches_jinja2(srv):
    st, props, _ = call(srv.url, "/props")
    assert st == 200
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "And?"}]
    for add in (True, False):
        st, body, _ = call(srv.url, "/apply-template", {"messages": messages, "add_generation_prompt": add})
        assert st == 200, body
        assert body["prompt"] == jinja2_render(props["chat_template"], messages, add)
    # The count of a chat request's prompt is the tokens of that text.
    st, n, _ = call(srv.url, "/v1/chat/completions/input_tokens", {"messages": messages})
    st2, toks, _ = call(srv.url, "/tokenize", {"content": jinja2_render(props["chat_template"], messages, True)})
    assert st == 200 and n["input_tokens"] == len(toks["tokens"])


def test_props_and_slots(srv):
    st, p, _ = call(srv.url, "/props")
    assert st == 200 and p["total_slots"] == 2 and p["model_path"].endswith(".gguf")
    assert p["default_generation_settings"]["n_ctx"] == 1024  # llama-server's -c: all slots together
    assert p["default_generation_settings"]["params"]["seed"] == 42
    assert p["default_generation_settings"]["params"]["temperature"] == 0
    st, slots, _ = call(srv.url, "/slots")
    assert st == 200 and len(slots) == 2 and all(s["n_ctx"] == 1024 and not s["is_processing"] for s in slots)
    st, body, _ = call(srv.url, "/props", {"x": 1})
    assert st == 501 and body["error"]["type"] == "not_supported_error"


def test_slots_disabled_answers_501():
    s = ServerProcess("--parallel", "1", "-c", "512", "-t", "1", "--no-slots")
    try:
        st, body, _ = call(s.url, "/slots")
        assert st == 501 and body["error"]["type"] == "not_supported_error"
    finally:
        assert s.stop() == 0


def test_completion_fields(srv):
    st, r, _ = call(srv.url, "/completion", {"prompt": "The capital of France is", "n_predict": 8, "return_tokens": True,
                                             "n_probs": 3})
    assert st == 200, r
    assert r["stop"] is True and r["tokens_predicted"] == len(r["tokens"]) == 8 and r["stop_type"] == "limit"
    assert r["timings"]["predicted_n"] == 8 and r["timings"]["prompt_n"] + r["timings"]["cache_n"] == r["tokens_evaluated"]
    assert r["prompt"] == "The capital of France is" and isinstance(r["has_new_line"], bool)
    assert r["generation_settings"]["n_predict"] == 8 and r["generation_settings"]["seed"] == 42
    probs = r["completion_probabilities"]
    assert [p["id"] for p in probs] == r["tokens"]
    for p in probs:  # greedy (--temp 0): the chosen token is the most likely one
        assert len(p["top_logprobs"]) == 3 and p["top_logprobs"][0]["id"] == p["id"]
        assert p["logprob"] <= 0 and p["top_logprobs"][0]["logprob"] >= p["top_logprobs"][1]["logprob"]
    # post_sampling_probs: the distribution after the sampler's chain, i.e. the model's top 3
    # renormalised (top_k 3, temperature 1), the chosen token among them.
    chain = {"prompt": "The capital of France is", "n_predict": 4, "n_probs": 5, "temperature": 1.0, "top_k": 3,
             "top_p": 1.0, "min_p": 0.0, "seed": 7}
    st, raw, _ = call(srv.url, "/completion", chain)
    st, post, _ = call(srv.url, "/completion", {**chain, "post_sampling_probs": True})
    assert st == 200 and post["content"] == raw["content"], post
    for a, b in zip(raw["completion_probabilities"], post["completion_probabilities"]):
        assert "logprob" not in b and len(b["top_probs"]) == 3 and b["id"] in [t["id"] for t in b["top_probs"]]
        top3 = a["top_logprobs"][:3]
        z = sum(math.exp(t["logprob"]) for t in top3)
        assert [t["id"] for t in b["top_probs"]] == [t["id"] for t in top3]
        for t, u in zip(top3, b["top_probs"]):
            assert abs(math.exp(t["logprob"]) / z - u["prob"]) < 2e-3, (t, u)
        assert b["prob"] == next(t["prob"] for t in b["top_probs"] if t["id"] == b["id"])
    # The same prompt again reuses the slot's cache; a stop string ends it as "word".
    st, again, _ = call(srv.url, "/completion", {"prompt": "The capital of France is", "n_predict": 8, "id_slot": r["id_slot"]})
    assert again["content"] == r["content"] and again["timings"]["cache_n"] > 0
    word = r["content"].split()[1] if len(r["content"].split()) > 1 else r["content"]
    st, stopped, _ = call(srv.url, "/completion", {"prompt": "The capital of France is", "n_predict": 8, "stop": [word]})
    assert stopped["stop_type"] == "word" and stopped["stopping_word"] == word
    st, nocache, _ = call(srv.url, "/completion", {"prompt": "The capital of France is", "n_predict": 2, "cache_prompt": False})
    assert nocache["timings"]["cache_n"] == 0
    # Streamed: token events, then the final object; the text is the same.
    events = stream(srv.url, "/completion", {"prompt": "The capital of France is", "n_predict": 8, "stream": True})
    assert events[-1]["stop"] is True and all(e["stop"] is False for e in events[:-1])
    assert "".join(e["content"] for e in events) == r["content"]
    # Token ids and mixed prompts.
    st, toks, _ = call(srv.url, "/tokenize", {"content": "The capital of France is"})
    st, by_ids, _ = call(srv.url, "/completion", {"prompt": toks["tokens"], "n_predict": 8})
    assert by_ids["content"] == r["content"]
    st, mixed, _ = call(srv.url, "/completion", {"prompt": toks["tokens"][:2] + [" of France is"], "n_predict": 8})
    assert st == 200


def test_sampler_fields_verbose_and_timings_per_token(srv):
    """llama-server's per-request samplers (echoed in generation_settings, checked), the request's
    "verbose", and streamed timings that grow token by token."""
    body = {"prompt": "Once upon a time", "n_predict": 6, "temperature": 0.7, "typical_p": 0.9, "repeat_last_n": 32,
            "dry_multiplier": 0.8, "dry_base": 1.5, "dry_allowed_length": 3, "dry_penalty_last_n": -1,
            "dry_sequence_breakers": ["\n", ":"], "xtc_probability": 0.2, "xtc_threshold": 0.3, "mirostat": 0, "seed": 5,
            "top_n_sigma": 2.5, "dynatemp_range": 0.3, "dynatemp_exponent": 1.5}
    st, r, _ = call(srv.url, "/completion", body)
    assert st == 200, r
    g = r["generation_settings"]
    for k in ("repeat_last_n", "dry_allowed_length", "dry_penalty_last_n", "mirostat"):
        assert g[k] == body[k], k
    for k in ("typical_p", "dry_multiplier", "dry_base", "xtc_probability", "xtc_threshold", "top_n_sigma", "dynatemp_range",
              "dynatemp_exponent"):
        assert abs(g[k] - body[k]) < 1e-6, k
    st, again, _ = call(srv.url, "/completion", body)
    assert again["content"] == r["content"]  # the same seed, the same samplers
    # llama-server's "samplers" (names or chars) in minfer's order: the stages left out are off.
    for samplers in (["top_k", "min_p", "temperature"], "kmt"):
        st, s, _ = call(srv.url, "/completion", {"prompt": "Hi", "n_predict": 2, "top_p": 0.5, "samplers": samplers})
        g = s["generation_settings"]
        assert st == 200 and g["top_p"] == 1.0 and g["typical_p"] == 1.0 and g["top_k"] == 40, (samplers, g)
    for bad, needle in [({"logit_bias": {"99999999999999999999": 100}}, "logit_bias"), ({"typical_p": 2}, "typical_p"), ({"mirostat": 3}, "mirostat"), ({"xtc_threshold": 0.9}, "xtc_threshold"),
                        ({"dry_sequence_breakers": "x"}, "dry_sequence_breakers"), ({"dry_base": 0.5}, "dry_base"),
                        ({"dynatemp_range": -1}, "dynatemp_range"), ({"dynatemp_exponent": -2}, "dynatemp_exponent"),
                        ({"samplers": ["temperature", "top_k"]}, "sampler order is fixed"), ({"samplers": "kq"}, "samplers"),
                        ({"samplers": 5}, "samplers")]:
        st, e, _ = call(srv.url, "/completion", {"prompt": "x", "n_predict": 1, **bad})
        assert st == 400 and needle in e["error"]["message"], (bad, e)
    # One field table, one range per field (docs/sampling.md section 5): values the server once
    # refused or clamped, as the CLI takes them; the echo says every field, mirostat_m too.
    st, s, _ = call(srv.url, "/completion", {"prompt": "Hi", "n_predict": 1, "top_p": 0, "temperature": 3, "mirostat_m": 50,
                                             "presence_penalty": 3, "repeat_penalty": 11})
    g = s["generation_settings"]
    assert st == 200 and g["top_p"] == 0 and g["temperature"] == 3 and g["mirostat_m"] == 50 and g["presence_penalty"] == 3, g
    for bad, param in [({"temperature": -0.1}, "temperature"), ({"top_p": 1.01}, "top_p"), ({"seed": -2}, "seed"),
                       ({"max_tokens": -2}, "max_tokens"), ({"mirostat_m": 0}, "mirostat_m")]:
        st, e, _ = call(srv.url, "/v1/completions", {"prompt": "x", **bad})
        assert st == 400 and e["error"]["param"] == param and "must be" in e["error"]["message"], (bad, e)
    st, v, _ = call(srv.url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Book"}], "max_tokens": 2, "verbose": True})
    assert st == 200 and "Book" in v["__verbose"]["prompt"] and v["__verbose"]["n_prompt_tokens"] == v["usage"]["prompt_tokens"]
    st, v, _ = call(srv.url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Book"}], "max_tokens": 2})
    assert "__verbose" not in v
    for path, body, text_of in [
            ("/completion", {"prompt": "Once upon a time", "n_predict": 6, "ignore_eos": True}, lambda e: e.get("content")),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Count to ten"}], "max_tokens": 6,
                                      "ignore_eos": True}, lambda e: (e["choices"] or [{}])[0].get("delta", {}).get("content"))]:
        events = stream(srv.url, path, {**body, "stream": True, "timings_per_token": True})
        timed = [e for e in events if text_of(e)]
        assert len(timed) >= 3 and all("timings" in e for e in timed), events
        n = [e["timings"]["predicted_n"] for e in timed]
        assert n == sorted(n) and n[-1] > n[0] and all(e["timings"]["prompt_n"] > 0 for e in timed), n


def test_every_stream_sends_the_same_headers(srv):
    """Each streamed endpoint: server-sent events, not cached, passed through nginx as they come."""
    msgs = [{"role": "user", "content": "Hi"}]
    for path, body in [("/completion", {"prompt": "Hi", "n_predict": 2}), ("/v1/completions", {"prompt": "Hi", "max_tokens": 2}),
                       ("/v1/chat/completions", {"messages": msgs, "max_tokens": 2}),
                       ("/v1/messages", {"messages": msgs, "max_tokens": 2}), ("/v1/responses", {"input": "Hi", "max_output_tokens": 2})]:
        st, _, h = call(srv.url, path, {**body, "stream": True})
        assert st == 200 and h["Content-Type"] == "text/event-stream", (path, h)
        assert h.get("Cache-Control") == "no-cache" and h.get("X-Accel-Buffering") == "no", (path, h)


def test_truncated_and_tokens_cached():
    """A reply that fills its slot's context is "truncated"; tokens_cached is what the slot holds."""
    s = ServerProcess("-np", "1", "-c", "48", "-t", "2", "--temp", "0")
    try:
        st, r, _ = call(s.url, "/completion", {"prompt": "Once upon a time", "n_predict": -1, "ignore_eos": True})
        assert st == 200, r
        assert r["truncated"] is True and r["stop_type"] == "limit"
        # Every position holds a token; the last reply token is sampled from the last position.
        assert r["tokens_evaluated"] + r["tokens_predicted"] == 48 + 1
        slots = json.loads(urllib.request.urlopen(s.url + "/slots").read())
        assert r["tokens_cached"] == slots[0]["n_cached"] == 48
        st, r, _ = call(s.url, "/completion", {"prompt": "Once upon a time", "n_predict": 4, "ignore_eos": True})
        assert r["truncated"] is False and r["tokens_cached"] == r["tokens_evaluated"] + 3
    finally:
        assert s.stop() == 0


def test_serve_grammar_is_every_requests_default():
    schema = '{"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}'
    s = ServerProcess("-np", "1", "-c", "1024", "-t", "2", "--temp", "0", "-j", schema)
    try:
        st, r, _ = call(s.url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 40})
        assert st == 200, r
        assert isinstance(json.loads(r["choices"][0]["message"]["content"])["answer"], int), r
        # A request's own constraint wins.
        st, r, _ = call(s.url, "/completion", {"prompt": "Say yes:", "n_predict": 8, "grammar": 'root ::= "yes" | "no"'})
        assert r["content"] in ("yes", "no"), r
    finally:
        assert s.stop() == 0
    r = subprocess.run([os.environ.get("MINFER_BIN", "build/bin/minfer"), "serve", MODEL, "--grammar", "root ::= ("],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--grammar" in r.stderr, r.stderr


def test_context_size_error_has_both_shapes(srv):
    long = "word " * 1500
    for path, body in [("/completion", {"prompt": long}), ("/v1/chat/completions", {"messages": [{"role": "user", "content": long}]})]:
        st, r, _ = call(srv.url, path, body)
        assert st == 400, r
        e = r["error"]
        assert e["type"] == "exceed_context_size_error" and e["code"] == "context_length_exceeded"
        assert e["n_ctx"] == 1024 and e["n_prompt_tokens"] > 1024


def test_an_error_after_acceptance_has_its_own_status_and_a_hung_up_client_frees_its_slot(srv):
    # Every token banned: the sampler fails on the first step, within the first second, so the
    # reply is a 500 (not a 200 whose body is the error), on every endpoint.
    ban = {"logit_bias": [[i, False] for i in range(49152)], "max_tokens": 4}
    for path, body in [("/completion", {"prompt": "Hi"}), ("/v1/completions", {"prompt": "Hi"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})]:
        st, r, _ = call(srv.url, path, {**body, **ban})
        assert st == 500 and "masked" in r["error"]["message"], (path, st, r)
    # A client that gives up before the reply (llama-server's test_cancel_request): its slot is
    # free again within about a second, not after the whole generation.
    req = urllib.request.Request(srv.url + "/completion", data=json.dumps({"prompt": "Once upon a time", "n_predict": 4000,
                                                                          "ignore_eos": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(Exception):
        urllib.request.urlopen(req, timeout=0.1)
    deadline = time.time() + 3
    while time.time() < deadline:
        st, slots, _ = call(srv.url, "/slots")
        if not any(x["is_processing"] for x in slots):
            break
        time.sleep(0.1)
    assert not any(x["is_processing"] for x in slots), slots


def test_metrics_need_the_flag_and_use_llama_names(srv):
    st, body, h = call(srv.url, "/metrics")
    assert st == 200 and "Process-Start-Time-Unix" in h  # srv runs with --metrics
    for name in ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:n_decode_total",
                 "llamacpp:requests_processing", "minfer_requests_total"):
        assert f"# TYPE {name} " in body, name
    s = ServerProcess("--parallel", "1", "-c", "512", "-t", "1", metrics=False)
    try:
        st, body, _ = call(s.url, "/metrics")
        assert st == 501 and body["error"]["type"] == "not_supported_error"
    finally:
        assert s.stop() == 0


def test_cors_and_api_key_headers():
    s = ServerProcess("--parallel", "1", "-c", "512", "-t", "1", "--api-key", "k1,k2", "--cors-origins", "localhost")
    try:
        pre = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
        st, _, h = call(s.url, "/completion", headers=pre, method="OPTIONS")
        assert st == 200 and h.get("Access-Control-Allow-Origin") == "http://localhost:3000"
        st, _, h = call(s.url, "/completion", headers={**pre, "Origin": "http://localhost.evil.com"}, method="OPTIONS")
        assert st == 200 and "Access-Control-Allow-Origin" not in h
        body = {"prompt": "Hi", "n_predict": 1}
        assert call(s.url, "/completion", body)[0] == 401
        assert call(s.url, "/completion", body, {"Authorization": "Bearer k2"})[0] == 200
        assert call(s.url, "/completion", body, {"X-Api-Key": "k1"})[0] == 200
        assert call(s.url, "/completion", body, {"X-Api-Key": "k3"})[0] == 401
        assert call(s.url, "/health")[0] == 200 and call(s.url, "/")[0] == 200  # public: health and the chat page
    finally:
        assert s.stop() == 0


def test_llama_server_flags():
    """The flags users pass to llama-server start minfer serve; unsupported ones are refused by name."""
    bin_ = os.environ.get("MINFER_BIN", "build/bin/minfer")
    s = ServerProcess("-np", "2", "--ctx-size", "1024", "--threads", "2", "-ub", "64", "--cont-batching", "--jinja",
                      "-fa", "on", "-ngl", "99", "--no-webui", "--reasoning-format", "deepseek", "--alias", "b,a", "--tags", "x,y",
                      "--slots", "-ctk", "f16", "-ctv", "f16")
    try:
        st, m, _ = call(s.url, "/v1/models")
        # Every alias is a name of the model; the id is the first in sorted order (llama-server's rule).
        assert m["data"][0]["id"] == "a" and {"a", "b"} <= set(m["data"][0]["aliases"]) and m["data"][0]["tags"] == ["x", "y"]
        assert call(s.url, "/")[0] == 404  # --no-webui
    finally:
        assert s.stop() == 0
    for flag, why in [(["--lora", "x.gguf"], "LoRA"), (["--mmproj", "x.gguf"], "multimodal"), (["--rerank"], "reranking"),
                      (["-ts", "1,1"], "GPU")]:
        r = subprocess.run([bin_, "serve", MODEL, *flag], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and why in r.stderr, (flag, r.stderr)
