"""A long-lived `minfer serve` under a randomized mix of real-client behaviour, the way users
run it: streamed and plain requests, greedy and sampled, streams dropped after a few chunks,
clients that give up before the reply, keep-alive connections reused, conversations that extend
a cached prefix, malformed bodies and bad fields, more clients than slots (so 503 + Retry-After
happens), and a loop of one-shot CLI runs on the same busy machine.

Asserted: no unexpected status, no completed stream without [DONE], every greedy answer equal to
its solo answer (taken from a separate idle server that prefills each prompt in one chunk, while
the chaos server splits prompts into 5-token chunks and reuses prefixes from its slots), no CLI
run that hangs or crashes, and afterwards an idle server (/metrics slots_busy and queue_length 0,
/health 200) that still answers greedy requests as before. The counts are printed (pytest -s).

MINFER_CHAOS_SECONDS bounds the mixed phase (default 60). MINFER_CHAOS_SERVER_ARGS adds flags to
every server here (e.g. "-ngl all --device Vulkan0": the same guarantees with the layers on a
GPU) and MINFER_CHAOS_MODEL serves another GGUF (e.g. a small random-weight model, for a
software device). MINFER_CHAOS_PARALLEL sets the long-lived server's slots (default 3)."""
import http.client
import json
import os
import random
import socket
import subprocess
import threading
import time
from collections import Counter

from conftest import BIN, MODEL, ServerProcess as _ServerProcess, assert_idle, join_clients

EXTRA = os.environ.get("MINFER_CHAOS_SERVER_ARGS", "").split()
CHAOS_MODEL = os.environ.get("MINFER_CHAOS_MODEL", "") or MODEL
PARALLEL = os.environ.get("MINFER_CHAOS_PARALLEL", "3")


def ServerProcess(*args, **kw):
    kw.setdefault("model", CHAOS_MODEL)
    return _ServerProcess(*args, *EXTRA, **kw)

SECONDS = float(os.environ.get("MINFER_CHAOS_SECONDS", "60"))
SYS = {"role": "system", "content": "You are a concise assistant."}
LONG = "Then explain in a long and detailed paragraph, with many examples, why the sky looks blue. " * 6

# Greedy conversations: several share prefixes (a system prompt, a first user turn, a turn that a
# later conversation extends), one is longer than 64 tokens, so prefix reuse and chunking matter.
CONVERSATIONS = [
    [{"role": "user", "content": "List three colors."}],
    [{"role": "user", "content": "List three colors. " + LONG}],
    [{"role": "user", "content": "Name a fruit."}],
    [SYS, {"role": "user", "content": "Name an animal."}],
    [SYS, {"role": "user", "content": "Name an animal."}, {"role": "assistant", "content": "A cat."},
     {"role": "user", "content": "Name another one."}],
    [SYS, {"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
]
MAX_TOKENS = [16, 12, 8, 10, 14, 6, 20]

BAD_BODIES = [
    b"{not json",
    b"[]",
    json.dumps({"messages": []}).encode(),
    json.dumps({"messages": [{"role": "wizard", "content": "hi"}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "temperature": -3}).encode(),
    json.dumps({"messages": [{"role": "user", "content": 7}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "n": 0}).encode(),
]


def body(messages, max_tokens, stream=False, **kw):
    return json.dumps({"model": "smollm2", "messages": messages, "max_tokens": max_tokens, "stream": stream,
                       **kw}).encode()


def read_stream(resp, limit=None):
    """Text of a chat stream and whether it ended with [DONE]; stops after `limit` events."""
    text, done, events = "", False, 0
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            done = True
            resp.read()  # the end of the chunked body: the connection is reusable
            break
        obj = json.loads(data)
        assert "error" not in obj, f"stream error: {obj}"
        for ch in obj.get("choices", []):
            text += (ch.get("delta") or {}).get("content") or ""
        events += 1
        if limit is not None and events >= limit:
            break
    return text, done


class Client:
    """One keep-alive connection, reopened when the server or the client closed it."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def request(self, data, timeout=120, path="/v1/chat/completions"):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                self.conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                return self.conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest):
                self.close()  # a keep-alive connection the server had closed: one retry
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def tally():
    """What the client threads of a mixed phase record: (counts, failures, note(key), fail(msg))."""
    counts, failures, lock = Counter(), [], threading.Lock()

    def note(key):
        with lock:
            counts[key] += 1

    def fail(msg):
        with lock:
            failures.append(msg)

    return counts, failures, note, fail


def solo_answers():
    """Each greedy conversation alone on an idle server that prefills it in one chunk."""
    s = ServerProcess("--parallel", "1", "-c", "1024", "-t", "2", "-b", "512")
    try:
        c = Client(s.port)
        out = []
        for conv, n in zip(CONVERSATIONS, MAX_TOKENS):
            r = c.request(body(conv, n, temperature=0))
            assert r.status == 200, r.read()
            out.append(json.loads(r.read())["choices"][0]["message"]["content"])
        c.close()
        return out
    finally:
        assert s.stop() == 0


def test_chaos_long_lived_server():
    solo = solo_answers()
    srv = ServerProcess("--parallel", PARALLEL, "--queue", "4", "-c", "3072", "-t", "2", "-b", "5")
    counts, failures, note, fail = tally()
    deadline = time.time() + SECONDS

    def busy(r):
        """503 with Retry-After is the documented answer of a full server."""
        if r.status == 503 and r.getheader("Retry-After"):
            r.read()
            note("503 busy")
            return True
        return False

    def worker(seed):
        rng = random.Random(seed)
        c = Client(srv.port)
        while time.time() < deadline and not failures:
            op = rng.choice(["greedy", "greedy", "greedy_stream", "greedy_stream", "sampled", "sampled_stream",
                             "drop_stream", "give_up", "bad"])
            i = rng.randrange(len(CONVERSATIONS))
            try:
                if op in ("greedy", "greedy_stream", "sampled", "sampled_stream"):
                    stream = op.endswith("_stream")
                    greedy = op.startswith("greedy")
                    sampling = {"temperature": 0} if greedy else {
                        "temperature": rng.choice([0.5, 0.9, 1.3]), "top_p": 0.9, "seed": rng.randrange(1 << 30)}
                    n = MAX_TOKENS[i] if greedy else rng.randint(1, 24)
                    r = c.request(body(CONVERSATIONS[i], n, stream=stream, **sampling))
                    if busy(r):
                        continue
                    if r.status != 200:
                        fail(f"{op}: status {r.status}: {r.read()[:300]}")
                        continue
                    if stream:
                        text, done = read_stream(r)
                        if not done:
                            fail(f"{op}: stream without [DONE]")
                    else:
                        choice = json.loads(r.read())["choices"][0]
                        text = choice["message"]["content"]
                        if choice["finish_reason"] not in ("stop", "length"):
                            fail(f"{op}: finish_reason {choice['finish_reason']}")
                    if greedy and text != solo[i]:
                        fail(f"{op} conversation {i}: {text!r} != solo {solo[i]!r}")
                    note(op)
                elif op == "drop_stream":
                    r = c.request(body(CONVERSATIONS[i], 64, stream=True, temperature=0.8))
                    if busy(r):
                        continue
                    if r.status != 200:
                        fail(f"{op}: status {r.status}")
                        continue
                    read_stream(r, limit=rng.randint(1, 4))
                    c.close()  # the client goes away mid-stream
                    note(op)
                elif op == "give_up":
                    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
                    data = body(CONVERSATIONS[i], 48, stream=rng.random() < 0.5, temperature=0.7)
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
                    time.sleep(rng.uniform(0.0, 0.4))
                    s.close()  # before the reply
                    note(op)
                else:
                    bad = rng.choice(BAD_BODIES)
                    r = c.request(bad)
                    payload = r.read()
                    if r.status == 503 and r.getheader("Retry-After"):
                        note("503 busy")
                    elif r.status != 400 or "error" not in json.loads(payload):
                        fail(f"bad body {bad[:60]!r}: status {r.status} {payload[:200]!r}")
                    else:
                        note("400 bad request")
            except (ConnectionError, socket.timeout, http.client.HTTPException) as e:
                fail(f"{op}: {type(e).__name__}: {e}")
                c.close()
        c.close()

    cli_results = []

    def cli_loop():
        n = 0
        while time.time() < deadline:
            try:
                p = subprocess.run([BIN, CHAOS_MODEL, "hi", "-n", "16", "-c", "128", "-t", "2", *EXTRA], capture_output=True,
                                   timeout=60)
                cli_results.append(p.returncode)
                if p.returncode != 0:
                    fail(f"one-shot CLI exited {p.returncode}: {p.stderr[-500:]!r}")
            except subprocess.TimeoutExpired:
                cli_results.append("hang")
                fail("one-shot CLI hung (killed after 60 s)")
            n += 1

    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(7)]
        threads.append(threading.Thread(target=cli_loop))
        for t in threads:
            t.start()
        join_clients(threads, SECONDS, failures)

        # Idle afterwards: nothing busy, nothing queued, healthy.
        assert_idle(srv.url)
        c = Client(srv.port)
        h = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        h.request("GET", "/health")
        assert h.getresponse().status == 200
        for i, conv in enumerate(CONVERSATIONS):
            r = c.request(body(conv, MAX_TOKENS[i], temperature=0))
            assert r.status == 200
            assert json.loads(r.read())["choices"][0]["message"]["content"] == solo[i]
        c.close()
        print(f"\nchaos: {SECONDS:.0f} s, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
              f"; CLI runs {len(cli_results)} (all exit 0: {all(r == 0 for r in cli_results)})")
        assert counts["greedy"] + counts["greedy_stream"] > 0
    finally:
        rc = srv.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {srv.read_log()[-2000:]}"


def test_greedy_independent_of_where_the_prefix_came_from():
    """The answer to a short prompt, down to its logprobs, must not change after a long prompt that shares its prefix
    ran in the same slot (the slot then serves the short prompt's prefix from rows that the long
    prompt's prefill computed, in one 100+-token chunk)."""
    s = ServerProcess("--parallel", "1", "-c", "1024", "-t", "2", "-b", "512")
    try:
        c = Client(s.port)
        def ask(conv, n):
            """The answer and its tokens' logprobs: equal floats mean equal arithmetic."""
            r = c.request(body(conv, n, temperature=0, logprobs=True))
            assert r.status == 200
            ch = json.loads(r.read())["choices"][0]
            return ch["message"]["content"], [t["logprob"] for t in ch["logprobs"]["content"]]

        shorts = ["List three colors.", "Name a fruit.", "Write a haiku about the sea.", "What is 2 + 2?",
                  "Name an animal.", "Describe a cat.", "Tell me a joke.", "What is the capital of France?"]
        other = [{"role": "user", "content": "Something else entirely."}]
        for q in shorts:
            short = [{"role": "user", "content": q}]
            ask(other, 1)  # the slot now holds an unrelated conversation
            solo = ask(short, 24)
            ask(other, 1)
            ask([{"role": "user", "content": q + " " + LONG}], 1)  # computes the shared prefix in one long chunk
            assert ask(short, 24) == solo, f"{q!r} after a long prompt with the same prefix"
        c.close()
    finally:
        assert s.stop() == 0
