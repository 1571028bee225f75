"""Many models in one `minfer serve` (SmolLM2 and two tiny models from a --models-dir folder,
--models-max 2): requests routed by their model name on the OpenAI and Ollama APIs, each model
loaded on its first request, the least recently used idle one evicted for another, never one with
a request running, Ollama's keep_alive 0, llama-server's router endpoints (GET /models with each
status, POST /models/load and /models/unload), the 404 of an unknown model on both APIs,
--models-memory, and a stream that goes on while another model loads."""
import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import MODEL, ServerProcess, post_json

MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "build/bin/minfer-make-test-model")


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return json.loads(r.read().decode())


def status(s):
    return {m["id"]: m["status"]["value"] for m in get(s.url, "/models")["data"]}


def wait_status(s, model, want, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if status(s)[model] == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"{model} is {status(s)[model]}, not {want}: " + s.read_log()[-2000:])


def chat(s, model, content="Hi", max_tokens=8):
    return post_json(s.url, "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}],
                                                     "max_tokens": max_tokens, "temperature": 0})


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    for name, seed in (("tiny-a", "1"), ("tiny-b", "2")):
        subprocess.run([MAKE_MODEL, "--preset", "tiny", "--vocab-from", MODEL, "--seed", seed, "--out", str(d / f"{name}.gguf")],
                       check=True, capture_output=True, timeout=60)
    s = ServerProcess("--models-dir", str(d), "--models-max", "2", "-np", "1", "-c", "1024", "-t", "2",
                      models=[MODEL])
    yield s
    rc = s.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {s.read_log()[-2000:]}"


SMOL = os.path.basename(MODEL)[:-5]


def test_lists_before_any_load(pool):
    assert status(pool) == {SMOL: "unloaded", "tiny-a": "unloaded", "tiny-b": "unloaded"}
    tags = [m["name"] for m in get(pool.url, "/api/tags")["models"]]
    assert tags == [SMOL + ":latest", "tiny-a:latest", "tiny-b:latest"]
    assert get(pool.url, "/api/ps")["models"] == []


def test_unknown_model_is_404_on_both_apis(pool):
    st, body = chat(pool, "nope")
    assert st == 404 and body["error"]["code"] == "model_not_found" and "'nope'" in body["error"]["message"]
    st, body = post_json(pool.url, "/api/chat", {"model": "nope", "messages": [{"role": "user", "content": "Hi"}], "stream": False})
    assert st == 404 and "nope" in body["error"] and "not found" in body["error"]
    st, body = post_json(pool.url, "/models/load", {"model": "nope"})
    assert st == 404
    st, body = post_json(pool.url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})
    assert st == 400 and "'model' is required" in body["error"]["message"]


def test_route_by_name_and_evict_the_least_recently_used(pool):
    st, a = chat(pool, "tiny-a")
    assert st == 200 and a["model"] == "tiny-a"
    st, b = post_json(pool.url, "/api/chat", {"model": "tiny-b:latest", "messages": [{"role": "user", "content": "Hi"}],
                                              "stream": False, "options": {"num_predict": 8, "temperature": 0}})
    assert st == 200 and b["model"] == "tiny-b:latest" and b["done"]
    assert status(pool) == {SMOL: "unloaded", "tiny-a": "loaded", "tiny-b": "loaded"}
    # A third model: tiny-a, the least recently used, makes room.
    st, c = chat(pool, SMOL)
    assert st == 200
    assert status(pool) == {SMOL: "loaded", "tiny-a": "unloaded", "tiny-b": "loaded"}
    assert "tiny-a evicted" in pool.read_log()
    # Loaded again, it answers as before (greedy).
    st, a2 = chat(pool, "tiny-a")
    assert st == 200 and a2["choices"][0]["message"] == a["choices"][0]["message"]
    assert status(pool)["tiny-b"] == "unloaded"


def test_a_model_with_a_request_running_is_not_evicted(pool):
    long_reply = {}

    def run():
        long_reply["r"] = post_json(pool.url, "/completion", {"model": SMOL, "prompt": "Once upon a time", "n_predict": 500,
                                                               "ignore_eos": True, "temperature": 0})

    t = threading.Thread(target=run)
    t.start()
    wait_status(pool, SMOL, "loaded")
    time.sleep(0.5)  # its request holds it
    # tiny-b is touched after SmolLM2's request began: SmolLM2 is the least recently used, but busy.
    assert chat(pool, "tiny-b")[0] == 200
    assert status(pool) == {SMOL: "loaded", "tiny-a": "unloaded", "tiny-b": "loaded"}
    assert chat(pool, "tiny-a")[0] == 200
    assert status(pool) == {SMOL: "loaded", "tiny-a": "loaded", "tiny-b": "unloaded"}
    # /models/unload refuses a model a request holds.
    st, body = post_json(pool.url, "/models/unload", {"model": SMOL})
    assert st == 409, body
    t.join(timeout=120)
    st, body = long_reply["r"]
    assert st == 200 and body["tokens_predicted"] == 500


def test_keep_alive_and_router_endpoints(pool):
    ps = get(pool.url, "/api/ps")["models"]
    assert sorted(m["name"] for m in ps) == sorted([SMOL + ":latest", "tiny-a:latest"])
    assert all(m["expires_at"] > "2000" and m["size"] > 0 for m in ps)
    # keep_alive 0: unloaded once the request is answered.
    st, r = post_json(pool.url, "/api/generate", {"model": "tiny-a", "prompt": "Hi", "stream": False, "keep_alive": 0,
                                                  "options": {"num_predict": 4}})
    assert st == 200 and r["done"]
    wait_status(pool, "tiny-a", "unloaded", timeout=5)
    assert [m["name"] for m in get(pool.url, "/api/ps")["models"]] == [SMOL + ":latest"]
    # keep_alive -1: kept for good.
    st, r = post_json(pool.url, "/api/generate", {"model": "tiny-b", "prompt": "Hi", "stream": False, "keep_alive": -1,
                                                  "options": {"num_predict": 4}})
    assert st == 200
    ps = {m["name"]: m for m in get(pool.url, "/api/ps")["models"]}
    assert ps["tiny-b:latest"]["expires_at"].startswith("2318")
    # llama-server's router: unload, then load.
    assert post_json(pool.url, "/models/unload", {"model": "tiny-b"}) == (200, {"success": True})
    assert status(pool)["tiny-b"] == "unloaded"
    assert post_json(pool.url, "/models/load", {"model": "tiny-a"}) == (200, {"success": True})
    assert status(pool) == {SMOL: "loaded", "tiny-a": "loaded", "tiny-b": "unloaded"}


def test_memory_budget_evicts_the_least_recently_used(tmp_path):
    """--models-memory (no count limit): three 103 MiB models in 250 MiB hold two at once; a
    model is counted by its file's size until its first load adds its KV cache."""
    for name in ("tiny-a", "tiny-b", "tiny-c"):
        subprocess.run([MAKE_MODEL, "--preset", "tiny", "--vocab-from", MODEL, "--seed", "1", "--out", str(tmp_path / f"{name}.gguf")],
                       check=True, capture_output=True, timeout=60)
    s = ServerProcess("--models-dir", str(tmp_path), "--models-max", "0", "--models-memory", "250M", "-np", "1", "-c", "512",
                      "-t", "2", models=[])
    try:
        assert chat(s, "tiny-a")[0] == 200
        assert chat(s, "tiny-b")[0] == 200
        assert status(s) == {"tiny-a": "loaded", "tiny-b": "loaded", "tiny-c": "unloaded"}
        assert chat(s, "tiny-c")[0] == 200
        assert status(s) == {"tiny-a": "unloaded", "tiny-b": "loaded", "tiny-c": "loaded"}
        log = s.read_log()
        assert "tiny-a evicted (least recently used; --models-memory 0.24 GiB)" in log, log[-2000:]
        assert "MiB with its KV cache" in log
    finally:
        assert s.stop() == 0
    bad = subprocess.run([os.environ.get("MINFER_BIN", "build/bin/minfer"), "serve", "--models-dir", str(tmp_path),
                          "--models-memory", "12X"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "'12X'" in bad.stderr, bad.stderr


GEMMA3 = os.environ.get("MINFER_GEMMA3", os.path.expanduser("~/.cache/minfer/models/gemma3-270m-Q4_K_M.gguf"))


def test_loading_one_model_does_not_stall_another(tmp_path):
    """SmolLM2 streams while Gemma 3 270M (a second or two to load) loads on another request: the
    stream's tokens keep coming during the load (the largest gap well under the load time)."""
    import http.client
    s = ServerProcess("--models-max", "2", "-np", "1", "-c", "2048", "-t", "2", models=[MODEL, GEMMA3])
    gemma = os.path.basename(GEMMA3)[:-5]
    try:
        assert chat(s, SMOL)[0] == 200  # loaded, graphs built
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        conn.request("POST", "/completion", body=json.dumps({"model": SMOL, "prompt": "Once upon a time", "n_predict": 1500,
                                                             "ignore_eos": True, "temperature": 0, "stream": True}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200
        arrivals = []
        load = {}

        def load_gemma():
            load["t0"] = time.monotonic()
            load["reply"] = chat(s, gemma, max_tokens=1)
            load["t1"] = time.monotonic()

        t = None
        for line in iter(r.readline, b""):
            if not line.startswith(b"data: "):
                continue
            arrivals.append(time.monotonic())
            if len(arrivals) == 50:
                t = threading.Thread(target=load_gemma)
                t.start()
            if json.loads(line[6:]).get("stop"):
                break
            if "t1" in load and arrivals[-1] > load["t1"] + 0.3:
                break  # enough after the load
        conn.close()
        t.join(timeout=120)
        assert load["reply"][0] == 200, load["reply"]
        during = [a for a in arrivals if load["t0"] <= a <= load["t1"]]
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:]) if b >= load["t0"] and a <= load["t1"]]
        loaded = float(re.search(rf"{re.escape(gemma)}: loaded in ([0-9.]+) s", s.read_log()).group(1))
        print(f"\n{gemma} loaded in {loaded:.2f} s (request {load['t1'] - load['t0']:.2f} s); {SMOL} streamed {len(during)} "
              f"tokens meanwhile, largest gap {max(gaps):.3f} s")
        assert loaded > 0.2, "the load is too short to tell"
        assert len(during) >= 10 and max(gaps) < loaded / 2, (len(during), max(gaps), loaded)
    finally:
        assert s.stop() == 0


def test_props_and_slots_per_model(pool):
    """llama-server's router: GET /props and /slots take ?model= (required with several models),
    ?autoload=false answers for a loaded model only; POST /slots/ID names its model in the body."""
    import urllib.error
    try:
        get(pool.url, "/props")
        raise AssertionError("GET /props without ?model= answered")
    except urllib.error.HTTPError as e:
        assert e.code == 400 and "model name is missing" in json.loads(e.read())["error"]["message"]
    assert post_json(pool.url, "/models/unload", {"model": "tiny-b"})[0] == 200
    try:
        get(pool.url, "/props?model=tiny-b&autoload=false")
        raise AssertionError("autoload=false loaded it")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and "not loaded" in json.loads(e.read())["error"]["message"]
    assert status(pool)["tiny-b"] == "unloaded"
    props = get(pool.url, "/props?model=tiny-b")
    assert props["model_alias"] == "tiny-b" and props["model_path"].endswith("tiny-b.gguf")
    assert status(pool)["tiny-b"] == "loaded"
    slots = get(pool.url, "/slots?model=tiny-b:latest")
    assert len(slots) == 1 and slots[0]["id"] == 0 and not slots[0]["is_processing"]
    st, body = post_json(pool.url, "/slots/0?action=erase", {"model": "tiny-b"})
    assert st == 200 and body["id_slot"] == 0, body
    st, body = post_json(pool.url, "/slots/0?action=erase", {})
    assert st == 400 and "'model' is required" in body["error"]["message"]
    try:
        get(pool.url, "/props?model=nope")
        raise AssertionError("an unknown model answered")
    except urllib.error.HTTPError as e:
        assert e.code == 404


def test_delete_refuses_a_file_it_only_reads(pool):
    """DELETE /api/delete of a --models-dir model: a 400 naming why, the file and the entry stay
    (its stem could name another cached model, which must not go instead)."""
    req = urllib.request.Request(pool.url + "/api/delete", data=json.dumps({"model": "tiny-a"}).encode(), method="DELETE",
                                 headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("deleted a --models-dir file")
    except urllib.error.HTTPError as e:
        assert e.code == 400 and "only reads" in json.loads(e.read())["error"]
    path = [m["path"] for m in get(pool.url, "/models")["data"] if m["id"] == "tiny-a"][0]
    assert os.path.exists(path)
