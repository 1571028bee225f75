"""Ollama's model store endpoints on a pool server (`minfer serve` with no MODEL), driven by the
official `ollama` clients, unmodified, against loopback mocks of the Ollama registry and the
Hugging Face Hub (tests/hub/mock_registry.py): POST /api/pull streamed as Ollama streams it
(pulling manifest, pulling <digest> with total/completed, verifying sha256 digest, writing
manifest, success) and not, a connection dropped mid-download and resumed, the pulled model in
/api/tags and answering; /api/copy and DELETE /api/delete (a loaded model unloaded), and their
errors (404 unknown, 400 bad name, 500 for a model the registry does not have)."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import ollama
import pytest

from conftest import MODEL, ServerProcess, run_node_test

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hub"))
from mock_registry import Blob, Cdn, MockHub, MockOllama  # noqa: E402

MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "build/bin/minfer-make-test-model")


def tiny(path, seed):
    subprocess.run([MAKE_MODEL, "--preset", "tiny", "--vocab-from", MODEL, "--seed", str(seed), "--out", str(path)],
                   check=True, capture_output=True, timeout=60)
    return str(path)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A pool server whose caches are all under a fresh HOME (one tiny model in its model folder),
    the registry and the Hub mocked; yields (server, registry, hub, cdn, blobs)."""
    home = tmp_path_factory.mktemp("home")
    models = home / "models"
    models.mkdir()
    tiny(models / "tiny-local.gguf", 1)
    blobs = {name: Blob(tiny(home / f"{name}.src", seed)) for name, seed in (("pulled", 2), ("dropped", 3), ("hf", 4), ("node", 5))}
    cdn = Cdn()
    hub, reg = MockHub(cdn), MockOllama(cdn)
    reg.add_model("tiny-pulled", "1b", blobs["pulled"])
    reg.add_model("tiny-dropped", "latest", blobs["dropped"])
    reg.add_model("tiny-node", "latest", blobs["node"])
    hub.add_repo("test/tiny-GGUF", {"tiny-Q8_0.gguf": blobs["hf"]})
    env = {"HOME": str(home), "MINFER_MODEL_DIR": str(models), "MINFER_OLLAMA_DIR": str(home / "minfer-ollama"),
           "OLLAMA_MODELS": str(home / "ollama"), "HF_HUB_CACHE": str(home / "hf"), "HF_ENDPOINT": hub.endpoint,
           "MINFER_OLLAMA_REGISTRY": reg.url, "MINFER_HTTP_RETRY_MS": "20", "HF_HUB_OFFLINE": "0"}
    s = ServerProcess("-np", "1", "-c", "512", "-t", "2", models=[], env=env)
    yield s, reg, hub, cdn, blobs
    rc = s.stop()
    for m in (hub, reg, cdn):
        m.close()
    assert rc == 0, f"exit code {rc} after SIGTERM: {s.read_log()[-2000:]}"


def names(c):
    return sorted(m.model for m in c.list().models)


def test_pull_streams_ollamas_progress_and_serves_the_model(store):
    s, _, _, _, blobs = store
    c = ollama.Client(host=s.url)
    assert names(c) == ["tiny-local:latest"]
    lines = list(c.pull("tiny-pulled:1b", stream=True))
    statuses = [p.status for p in lines]
    assert statuses[0] == "pulling manifest" and statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    sha = blobs["pulled"].sha256
    model = [p for p in lines if p.digest == "sha256:" + sha]
    assert model and all(p.status == "pulling " + sha[:12] and p.total == blobs["pulled"].size for p in model)
    done = [p.completed for p in model]
    assert done == sorted(done) and done[-1] == blobs["pulled"].size
    assert "tiny-pulled:1b" in names(c)
    r = c.generate(model="tiny-pulled:1b", prompt="Hi", options={"num_predict": 3, "temperature": 0})
    assert r.done and r.eval_count == 3
    # Pulled again: already cached, the same ending.
    assert [p.status for p in c.pull("tiny-pulled:1b", stream=True)][-1] == "success"


def test_pull_resumes_after_a_dropped_connection(store):
    s, _, _, cdn, blobs = store
    b = blobs["dropped"]
    cdn.fault(b.sha256, drops=1, drop_after=b.size // 2)
    r = ollama.Client(host=s.url).pull("ollama:tiny-dropped", stream=False)
    assert r.status == "success"
    assert cdn.served[b.sha256] == 2  # the cut transfer, then the rest from where it stopped
    assert "tiny-dropped:latest" in names(ollama.Client(host=s.url))


def test_pull_from_hugging_face_and_errors(store):
    s, _, _, _, _ = store
    c = ollama.Client(host=s.url)
    assert c.pull("hf.co/test/tiny-GGUF:Q8_0").status == "success"
    assert "hf.co/test/tiny-GGUF:Q8_0" in names(c)  # as Ollama lists a model pulled from the Hub
    # Pulled again by the repository alone (the hub picks its one file): served by that name too.
    assert c.pull("hf.co/test/tiny-GGUF").status == "success"
    assert c.generate(model="hf.co/test/tiny-GGUF", prompt="Hi", options={"num_predict": 1}).done
    with pytest.raises(ollama.ResponseError) as e:  # a streamed error is the last line's
        list(c.pull("no-such-model", stream=True))
    assert "no-such-model" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("no-such-model")
    assert e.value.status_code == 500 and "not found" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("bad name!")
    assert e.value.status_code == 400


def test_copy_and_delete(store):
    s, _, _, _, _ = store
    c = ollama.Client(host=s.url)
    assert c.copy("tiny-local", "my-copy:v1").status == "success"
    assert "my-copy:v1" in names(c)
    assert c.generate(model="my-copy:v1", prompt="Hi", options={"num_predict": 2}).done
    assert "my-copy:v1" in [m.model for m in c.ps().models]
    assert c.delete("my-copy:v1").status == "success"  # loaded: unloaded, then its files go
    assert "my-copy:v1" not in names(c) and "my-copy:v1" not in [m.model for m in c.ps().models]
    assert "tiny-local:latest" in names(c)  # the source stays
    for call in (lambda: c.delete("my-copy:v1"), lambda: c.copy("nothing-here", "x")):
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as e:
        c.copy("tiny-local", "bad name!")
    assert e.value.status_code == 400
    # A copy over an existing name, spelled with its namespace: the name now means the new source.
    digest = lambda name: {m.model: m.digest for m in c.list().models}[name]
    assert c.copy("tiny-local", "dup:v1").status == "success"
    first = digest("dup:v1")
    assert c.copy("tiny-pulled:1b", "library/dup:v1").status == "success"
    assert digest("dup:v1") == digest("tiny-pulled:1b") != first
    assert c.delete("dup:v1").status == "success"


def test_delete_while_a_request_holds_the_model(store):
    """The request goes on to its end; the model is gone from the lists at once and unloaded after."""
    c = ollama.Client(host=store[0].url)
    c.copy("tiny-local", "held:v1")
    stream = c.generate(model="held:v1", prompt="Hi", stream=True, options={"num_predict": 48, "temperature": 0})
    next(stream)
    assert c.delete("held:v1").status == "success"
    assert "held:v1" not in names(c)
    assert list(stream)[-1].done
    end = time.time() + 5
    while "held:v1" in [m.model for m in c.ps().models] and time.time() < end:
        time.sleep(0.05)
    assert "held:v1" not in [m.model for m in c.ps().models]


def test_num_ctx_loads_the_model_with_that_context(store):
    """Ollama's options.num_ctx: the model is (re)loaded with that many positions per slot; a
    request without it reloads serve's; the OpenAI API takes what is loaded."""
    s = store[0]
    c = ollama.Client(host=s.url)

    def ctx():
        return {m.model: m.context_length for m in c.ps().models}["tiny-local:latest"]

    c.generate(model="tiny-local", prompt="Hi", options={"num_predict": 1})
    default = ctx()
    for n in (128, 200):
        assert c.generate(model="tiny-local", prompt="Hi", options={"num_predict": 1, "num_ctx": n}).done
        assert ctx() == n
    openai = urllib.request.Request(s.url + "/v1/completions", data=json.dumps({"model": "tiny-local", "prompt": "Hi", "max_tokens": 1}).encode(),
                                    headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(openai, timeout=30) as r:
        assert r.status == 200 and ctx() == 200
    c.generate(model="tiny-local", prompt="Hi", options={"num_predict": 1})
    assert ctx() == default
    # /api/show runs no model: it leaves the loaded context as it is.
    assert c.generate(model="tiny-local", prompt="Hi", options={"num_predict": 1, "num_ctx": 128}).done
    c.show("tiny-local")
    assert ctx() == 128
    for bad in ("big", 4):  # below the engine's 8: refused before anything is unloaded
        with pytest.raises(ollama.ResponseError) as e:
            c.generate(model="tiny-local", prompt="Hi", options={"num_ctx": bad})
        assert e.value.status_code == 400 and "num_ctx" in e.value.error
    assert ctx() == 128


def test_version(store):
    with urllib.request.urlopen(store[0].url + "/api/version", timeout=10) as r:
        assert json.loads(r.read())["version"].count(".") == 2


def test_ollama_node_client(store):
    s, _, _, _, _ = store
    run_node_test("ollama-node-store.test.mjs", s.url, "ollama", "OLLAMA_NODE_MODULES")
