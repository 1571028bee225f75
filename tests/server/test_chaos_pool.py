"""Many models in one long-lived `minfer serve` under a random mix of real clients (issue 44 part
4): three models (SmolLM2 and two tiny random-weight models in real Llama shapes) with
--models-max 2, so models are evicted and loaded again while others decode. Clients on the OpenAI
API (plain and streamed) and on Ollama's (/api/chat and /api/generate, NDJSON streams, the official
`ollama` Python client too), streams cut after a few chunks, keep_alive 0 (unloaded when answered),
llama-server's POST /models/unload under load, unknown model names, malformed bodies.

Asserted: no unexpected status (200; 503 with Retry-After when every loaded model is held; 404 for
an unknown model; 400 for a bad body; 409 for unloading a model a request holds), every stream
ends (OpenAI's [DONE], Ollama's done: true), every greedy answer equal to the one a single-model
server gives for that model, models evicted and loaded again under load (counted from the log),
and afterwards: slots and queues idle (/metrics), greedy answers unchanged, and the resident
memory with every model unloaded back to its level before the mixed phase (VmRSS of the server,
printed). MINFER_POOL_CHAOS_SECONDS bounds the mixed phase (default 30)."""
import http.client
import json
import os
import random
import subprocess
import threading
import time
import urllib.request

import ollama

from conftest import MODEL, ServerProcess, assert_idle, join_clients, post_json
from test_chaos import BAD_BODIES, CONVERSATIONS, MAX_TOKENS, Client, read_stream, tally

MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "build/bin/minfer-make-test-model")
SECONDS = float(os.environ.get("MINFER_POOL_CHAOS_SECONDS", "30"))
SMOL = os.path.basename(MODEL)[:-5]
# Ollama's options that give the OpenAI endpoint's plain greedy text (Ollama's repeat_penalty
# default is 1.1).
OLLAMA_GREEDY = {"temperature": 0, "repeat_penalty": 1}


def openai_body(model, messages, max_tokens, stream=False, **kw):
    return json.dumps({"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream, **kw}).encode()


def ollama_body(model, messages, n, stream, keep_alive=None, **options):
    b = {"model": model, "messages": messages, "stream": stream, "options": {"num_predict": n, **options}}
    if keep_alive is not None:
        b["keep_alive"] = keep_alive
    return json.dumps(b).encode()


def read_ndjson(resp, limit=None):
    """Text of an Ollama /api/chat stream and whether its last object said done; stops after
    `limit` objects."""
    text, done, n = "", False, 0
    for line in iter(resp.readline, b""):
        if not line.strip():
            continue
        obj = json.loads(line)
        assert "error" not in obj, f"stream error: {obj}"
        text += (obj.get("message") or {}).get("content", "")
        n += 1
        if obj.get("done"):
            done = True
            resp.read()
            break
        if limit is not None and n >= limit:
            break
    return text, done


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def models_status(url):
    with urllib.request.urlopen(url + "/models", timeout=10) as r:
        return {m["id"]: m["status"]["value"] for m in json.loads(r.read())["data"]}


def unload_all(url, timeout=30):
    """Every model unloaded (a request still finishing holds its model: retried)."""
    end = time.time() + timeout
    while time.time() < end:
        st = models_status(url)
        if all(v == "unloaded" for v in st.values()):
            return
        for name, v in st.items():
            if v != "unloaded":
                post_json(url, "/models/unload", {"model": name})
        time.sleep(0.1)
    raise AssertionError(f"models still loaded: {models_status(url)}")


def make_models(d):
    paths = {}
    for name, seed in (("tiny-a", "1"), ("tiny-b", "2")):
        p = d / f"{name}.gguf"
        subprocess.run([MAKE_MODEL, "--preset", "tiny", "--vocab-from", MODEL, "--seed", seed, "--out", str(p)],
                       check=True, capture_output=True, timeout=60)
        paths[name] = str(p)
    return paths


def solo_answers(path):
    """Each greedy conversation on a single-model server of that model."""
    s = ServerProcess("--parallel", "1", "-c", "1024", "-t", "2", model=path)
    try:
        c = Client(s.port)
        out = []
        for conv, n in zip(CONVERSATIONS, MAX_TOKENS):
            r = c.request(openai_body("smollm2", conv, n, temperature=0))
            assert r.status == 200, r.read()
            out.append(json.loads(r.read())["choices"][0]["message"]["content"])
        c.close()
        return out
    finally:
        assert s.stop() == 0


def test_chaos_many_models(tmp_path):
    paths = make_models(tmp_path)
    names = [SMOL, "tiny-a", "tiny-b"]
    solo = {SMOL: solo_answers(MODEL), "tiny-a": solo_answers(paths["tiny-a"]), "tiny-b": solo_answers(paths["tiny-b"])}
    srv = ServerProcess("--models-dir", str(tmp_path), "--models-max", "2", "--parallel", "2", "--queue", "4",
                        "-c", "2048", "-t", "2", "-b", "16", "--timeout", "60", models=[MODEL])
    counts, failures, note, fail = tally()

    def warm_round():
        """Every model loaded and used once on both APIs (so the first loads' one-time costs,
        such as each row count's graph, are in the idle level)."""
        c = Client(srv.port)
        for m in names:
            r = c.request(openai_body(m, CONVERSATIONS[0], MAX_TOKENS[0], temperature=0))
            assert r.status == 200, r.read()
            assert json.loads(r.read())["choices"][0]["message"]["content"] == solo[m][0]
            st, b = post_json(srv.url, "/api/chat", json.loads(ollama_body(m, CONVERSATIONS[2], MAX_TOKENS[2], False, **OLLAMA_GREEDY)))
            assert st == 200 and b["message"]["content"] == solo[m][2], b
        c.close()

    try:
        warm_round()
        unload_all(srv.url)
        time.sleep(0.5)
        rss_before = rss_mb(srv.proc.pid)
        deadline = time.time() + SECONDS

        def ok_or_busy(r, op):
            """True for a 200; a 503 with Retry-After is counted; anything else fails."""
            if r.status == 200:
                return True
            payload = r.read()
            if r.status == 503 and r.getheader("Retry-After"):
                note("503 busy")
            else:
                fail(f"{op}: status {r.status}: {payload[:300]!r}")
            return False

        def worker(seed):
            rng = random.Random(seed)
            c = Client(srv.port)
            official = ollama.Client(host=srv.url, timeout=120)
            while time.time() < deadline and not failures:
                op = rng.choice(["openai", "openai_stream", "ollama", "ollama_stream", "ollama_client", "sampled",
                                 "drop_openai", "drop_ollama", "keep_alive_0", "unload", "unknown_model", "bad"])
                m = rng.choice(names)
                i = rng.randrange(len(CONVERSATIONS))
                conv, n = CONVERSATIONS[i], MAX_TOKENS[i]
                try:
                    if op in ("openai", "openai_stream"):
                        stream = op == "openai_stream"
                        r = c.request(openai_body(m, conv, n, stream=stream, temperature=0))
                        if not ok_or_busy(r, op):
                            continue
                        if stream:
                            text, done = read_stream(r)
                            if not done:
                                fail(f"{op} {m}: stream without [DONE]")
                        else:
                            text = json.loads(r.read())["choices"][0]["message"]["content"]
                        if text != solo[m][i]:
                            fail(f"{op} {m} conversation {i}: {text!r} != single-model {solo[m][i]!r}")
                    elif op in ("ollama", "ollama_stream", "keep_alive_0"):
                        stream = op == "ollama_stream"
                        keep = 0 if op == "keep_alive_0" else rng.choice([None, "5m", -1])
                        r = c.request(ollama_body(m, conv, n, stream, keep_alive=keep, **OLLAMA_GREEDY), path="/api/chat")
                        if not ok_or_busy(r, op):
                            continue
                        if stream:
                            text, done = read_ndjson(r)
                            if not done:
                                fail(f"{op} {m}: stream without done")
                        else:
                            text = json.loads(r.read())["message"]["content"]
                        if text != solo[m][i]:
                            fail(f"{op} {m} conversation {i}: {text!r} != single-model {solo[m][i]!r}")
                    elif op == "ollama_client":
                        try:
                            if rng.random() < 0.5:
                                text = official.chat(model=m, messages=conv, options={"num_predict": n, **OLLAMA_GREEDY}).message.content
                            else:
                                text = "".join(p.message.content for p in official.chat(
                                    model=m, messages=conv, options={"num_predict": n, **OLLAMA_GREEDY}, stream=True))
                        except ollama.ResponseError as e:
                            if e.status_code == 503:
                                note("503 busy")
                                continue
                            raise
                        if text != solo[m][i]:
                            fail(f"{op} {m} conversation {i}: {text!r} != single-model {solo[m][i]!r}")
                    elif op == "sampled":
                        r = c.request(openai_body(m, conv, rng.randint(1, 24), temperature=rng.choice([0.5, 0.9, 1.3]),
                                                  seed=rng.randrange(1 << 30)))
                        if ok_or_busy(r, op):
                            json.loads(r.read())
                    elif op == "drop_openai":
                        r = c.request(openai_body(m, conv, 64, stream=True, temperature=0.8))
                        if ok_or_busy(r, op):
                            read_stream(r, limit=rng.randint(1, 4))
                        c.close()  # the client goes away mid-stream
                    elif op == "drop_ollama":
                        r = c.request(ollama_body(m, conv, 64, True, temperature=0.8), path="/api/chat")
                        if ok_or_busy(r, op):
                            read_ndjson(r, limit=rng.randint(1, 4))
                        c.close()
                    elif op == "unload":
                        st, b = post_json(srv.url, "/models/unload", {"model": m})
                        if st not in (200, 409):
                            fail(f"unload {m}: status {st} {b}")
                        op = f"unload {st}"
                    elif op == "unknown_model":
                        bad_name = rng.choice(["nope", "tiny-c", SMOL + ":q8", "../tiny-a"])
                        if rng.random() < 0.5:
                            r = c.request(openai_body(bad_name, conv, 4))
                        else:
                            r = c.request(ollama_body(bad_name, conv, 4, False), path="/api/chat")
                        payload = r.read()
                        if r.status != 404 or "error" not in json.loads(payload):
                            fail(f"unknown model {bad_name!r}: status {r.status} {payload[:200]!r}")
                    else:
                        bad = rng.choice(BAD_BODIES)
                        try:  # with a model named, the body's own faults are what gets refused
                            parsed = json.loads(bad)
                            if isinstance(parsed, dict):
                                bad = json.dumps({**parsed, "model": m}).encode()
                        except ValueError:
                            pass
                        r = c.request(bad)
                        payload = r.read()
                        if r.status == 503 and r.getheader("Retry-After"):
                            note("503 busy")
                            continue
                        if r.status not in (400, 404) or "error" not in json.loads(payload):
                            fail(f"bad body {bad[:60]!r}: status {r.status} {payload[:200]!r}")
                    note(op)
                except (ConnectionError, TimeoutError, http.client.HTTPException, ollama.ResponseError) as e:
                    fail(f"{op} {m}: {type(e).__name__}: {e}")
                    c.close()
            c.close()

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        join_clients(threads, SECONDS, failures)

        # Idle afterwards: nothing busy, nothing queued, the same greedy answers.
        assert_idle(srv.url)
        warm_round()
        unload_all(srv.url)
        time.sleep(0.5)
        rss_after = rss_mb(srv.proc.pid)
        log = srv.read_log()
        evictions = log.count(" evicted (least recently used")
        loads = log.count(": loaded in ") + log.count(": awake: model loaded in ")
        print(f"\npool chaos: {SECONDS:.0f} s, 3 models, --models-max 2: " +
              ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
              f"; {evictions} evictions, {loads} loads (log); RSS all unloaded {rss_before:.0f} MB before, "
              f"{rss_after:.0f} MB after")
        assert evictions > 0, "no model was evicted under load"
        assert sum(v for k, v in counts.items() if k.startswith(("openai", "ollama"))) > 0
        assert rss_after <= rss_before * 1.10 + 16, f"resident memory {rss_before:.0f} MB -> {rss_after:.0f} MB"
    finally:
        rc = srv.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {srv.read_log()[-2000:]}"
