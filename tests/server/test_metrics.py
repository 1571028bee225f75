"""/metrics for routers: each model of a pool (two names of SmolLM2 in a --models-dir folder,
--models-max 1) has its own series with a model="NAME" label, and the gauges Kubernetes' Gateway
API Inference Extension reads under vLLM's names (vllm:num_requests_running, _waiting,
vllm:kv_cache_usage_perc; one series each, the whole server's) move with the per-model ones:
running during a stream, waiting for a busy slot and for a place among --models-max, back to 0
after. Every scrape is parsed by prometheus_client's text parser. One model: the same gauges and
no label."""
import http.client
import json
import os
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import MODEL, ServerProcess, post_json

VLLM = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc")


def scrape(s):
    """{(sample name, ((label, value), ...)): value} and the family order of each name's samples."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    c.request("GET", "/metrics")
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/plain; version=0.0.4")
    text = r.read().decode()
    c.close()
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):  # raises on any line it cannot parse
        for smp in fam.samples:
            samples[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
            types[smp.name] = fam.type
    return samples, types, text


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def wait_for(s, pred, what, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        samples = scrape(s)[0]
        if pred(samples):
            return samples
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: " + scrape(s)[2][-3000:])


def chat_body(model, max_tokens, stream=False):
    return {"model": model, "messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": max_tokens,
            "temperature": 0, "stream": stream, "ignore_eos": True}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    for name in ("smol-a", "smol-b"):
        os.symlink(MODEL, d / f"{name}.gguf")
    # 40 ms per step: a 400-token stream lasts 16 s, long enough to be seen running (it is cut short).
    s = ServerProcess("--models-dir", str(d), "--models-max", "1", "-np", "1", "-c", "512", "-t", "2",
                      models=[], env={"MINFER_TEST_STEP_DELAY_MS": "40"})
    yield s
    rc = s.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {s.read_log()[-2000:]}"


def test_before_any_load_every_model_has_its_gauges(pool):
    samples, types, _ = scrape(pool)
    for name in VLLM:
        assert types[name] == "gauge"
        # One series, the whole server's: whichever series of a name a router reads, it is this one.
        assert [k for k in samples if k[0] == name] == [(name, ())] and value(samples, name) == 0
    for m in ("smol-a", "smol-b"):
        assert value(samples, "minfer_model_loaded", model=m) == 0
        assert value(samples, "minfer_model_requests_waiting", model=m) == 0
    # Engine series only once a model has been loaded.
    assert not any(k[0] == "minfer_generated_tokens_total" for k in samples)


def test_gauges_move_with_a_stream_a_queue_and_a_wait_for_a_place(pool):
    # A stream to smol-a holds the only slot.
    conn = http.client.HTTPConnection("127.0.0.1", pool.port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body("smol-a", 400, stream=True)),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    # Running from its admission; holding KV positions from its first prefill step.
    samples = wait_for(pool, lambda m: value(m, "vllm:num_requests_running") == 1 and value(m, "vllm:kv_cache_usage_perc") > 0,
                       "smol-a running")
    assert value(samples, "minfer_slots_busy", model="smol-a") == 1
    assert value(samples, "minfer_model_loaded", model="smol-a") == 1
    assert value(samples, "minfer_model_loaded", model="smol-b") == 0
    kv = value(samples, "vllm:kv_cache_usage_perc")
    assert 0 < kv <= 1, kv  # the stream's positions of the slot's 512 (smol-a: the only model loaded)
    used = value(samples, "minfer_kv_positions_used", model="smol-a")
    assert value(samples, "minfer_kv_positions_total", model="smol-a") == 512 and kv == used / 512

    # One more for smol-a waits for its slot; one for smol-b for a place (--models-max 1).
    replies = {}

    def ask(model):
        replies[model] = post_json(pool.url, "/v1/chat/completions", chat_body(model, 4), timeout=60)

    threads = [threading.Thread(target=ask, args=(m,)) for m in ("smol-a", "smol-b")]
    for t in threads:
        t.start()
    samples = wait_for(pool, lambda m: value(m, "vllm:num_requests_waiting") == 2, "two waiting")
    assert value(samples, "minfer_queue_length", model="smol-a") == 1  # queued for the slot
    assert value(samples, "minfer_model_requests_waiting", model="smol-b") == 1  # waiting for a place
    assert value(samples, "vllm:num_requests_running") == 1
    assert value(samples, "vllm:kv_cache_usage_perc") >= kv  # the stream goes on

    conn.close()  # the stream's client goes away: its slot is freed, then smol-b takes smol-a's place
    for t in threads:
        t.join(timeout=60)
    assert replies["smol-a"][0] == 200 and replies["smol-b"][0] == 200, replies
    samples = wait_for(pool, lambda m: all(value(m, n) == 0 for n in VLLM), "an idle server")
    assert value(samples, "minfer_model_loaded", model="smol-a") == 0
    assert value(samples, "minfer_model_loaded", model="smol-b") == 1
    assert value(samples, "minfer_kv_positions_total", model="smol-a") == 0  # its KV cache freed
    # Each model's counters are its own; smol-a's stay after its unload.
    assert value(samples, "minfer_generated_tokens_total", model="smol-b") == 4
    assert value(samples, "minfer_generated_tokens_total", model="smol-a") >= 4 + 1
    assert value(samples, "llamacpp:tokens_predicted_total", model="smol-b") == 4
    assert value(samples, "minfer_requests_total", model="smol-b", path="/v1/chat/completions", status="200") == 1
    assert value(samples, "minfer_requests_total", model="smol-a", path="/v1/chat/completions", status="200") == 2
    assert value(samples, "minfer_request_duration_seconds_count", model="smol-b") == 1
    assert value(samples, "minfer_request_duration_seconds_bucket", model="smol-b", le="+Inf") == 1
    assert value(samples, "minfer_slots_total", model="smol-b") == 1


def test_a_request_that_reaches_no_model_is_counted_without_a_label(pool):
    st, _ = post_json(pool.url, "/v1/chat/completions", chat_body("nope", 4))
    assert st == 404
    samples = scrape(pool)[0]
    assert value(samples, "minfer_requests_total", path="/v1/chat/completions", status="404") == 1


def test_one_model_has_the_router_gauges_without_a_label():
    s = ServerProcess("-np", "2", "-c", "512", "-t", "2")
    try:
        assert post_json(s.url, "/v1/chat/completions", chat_body("smollm2", 4))[0] == 200
        samples, types, _ = scrape(s)
        assert not any(dict(k[1]).get("model") for k in samples)
        for name in VLLM:
            assert types[name] == "gauge" and value(samples, name) == 0
        assert value(samples, "minfer_kv_positions_total") == 512  # 2 slots of 256
        assert value(samples, "minfer_generated_tokens_total") == 4
    finally:
        assert s.stop() == 0
