"""--sleep-idle-seconds on `minfer serve`: after the idle time the model and its engine are freed
(the process's resident memory drops), /health, /props, /models and /metrics answer without
waking it, the next request that needs the model loads it again and answers as before, the
counters go on across the reload, a request longer than the idle time is never cut, and a
sleeping server shuts down cleanly."""
import json
import time
import urllib.request

from conftest import ServerProcess, metric, post_json

CHAT = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 16, "temperature": 0}


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=30) as r:
        raw = r.read().decode()
        return r.status, (json.loads(raw) if raw.startswith(("{", "[")) else raw)


def sleeping(s):
    return get(s.url, "/props")[1]["is_sleeping"]


def wait_sleeping(s, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if sleeping(s):
            return
        time.sleep(0.1)
    raise AssertionError("the server did not fall asleep: " + s.read_log()[-2000:])


def rss_kb(s):
    with open(f"/proc/{s.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_sleep_frees_the_model_and_a_request_wakes_it():
    s = ServerProcess("-np", "1", "-c", "4096", "-t", "2", "--sleep-idle-seconds", "1")
    try:
        st, before = post_json(s.url, "/v1/chat/completions", CHAT)
        assert st == 200 and not sleeping(s)
        generated = metric(s.url, "minfer_generated_tokens_total")
        awake_rss = rss_kb(s)
        wait_sleeping(s)
        assert "model unloaded" in s.read_log()
        assert rss_kb(s) < awake_rss - 40 * 1024, (rss_kb(s), awake_rss)  # the weights and the KV cache are gone
        # These answer while asleep, and do not wake it.
        assert get(s.url, "/health")[1]["status"] == "ok"
        assert get(s.url, "/v1/models")[1]["data"][0]["id"] == "smollm2"
        assert get(s.url, "/props")[1]["total_slots"] == 1
        assert metric(s.url, "minfer_generated_tokens_total") == generated and metric(s.url, "minfer_slots_total") == 1
        time.sleep(0.3)
        assert sleeping(s)
        # A request that needs the model loads it again: the same greedy answer, the counters go on.
        st, after = post_json(s.url, "/v1/chat/completions", CHAT)
        assert st == 200 and after["choices"][0]["message"] == before["choices"][0]["message"]
        assert not sleeping(s) and "awake: model loaded" in s.read_log()
        assert metric(s.url, "minfer_generated_tokens_total") == generated + after["usage"]["completion_tokens"]
        wait_sleeping(s)  # a sleeping server shuts down cleanly too (stop() asserts exit code 0)
    finally:
        assert s.stop() == 0


def test_a_request_longer_than_the_idle_time_is_not_cut():
    s = ServerProcess("-np", "1", "-c", "4096", "-t", "2", "--sleep-idle-seconds", "1", "--temp", "0")
    try:
        t0 = time.time()
        st, body = post_json(s.url, "/completion", {"prompt": "Once upon a time", "n_predict": 400, "ignore_eos": True,
                                                    "stream": True})
        assert st == 200 and time.time() - t0 > 1.2
        events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
        assert events[-1]["stop"] is True and events[-1]["tokens_predicted"] == 400
        wait_sleeping(s)
        # /tokenize needs the model's vocabulary: it wakes the server (llama-server's rule).
        assert post_json(s.url, "/tokenize", {"content": "Hello"})[1]["tokens"] and not sleeping(s)
    finally:
        assert s.stop() == 0


def test_without_the_flag_it_never_sleeps():
    s = ServerProcess("-np", "1", "-c", "512", "-t", "1")
    try:
        assert post_json(s.url, "/completion", {"prompt": "Hi", "n_predict": 2})[0] == 200
        time.sleep(1.5)
        assert not sleeping(s) and "model unloaded" not in s.read_log()
    finally:
        assert s.stop() == 0
