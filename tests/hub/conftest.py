import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from mock_registry import Blob, Cdn, MockHub, MockOllama  # noqa: E402

MINFER = os.environ.get("MINFER_BIN", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")


@pytest.fixture(scope="session")
def smol_blob():
    assert SMOLLM2 and os.path.isfile(SMOLLM2), f"MINFER_SMOLLM2={SMOLLM2!r} missing (scripts/setup.sh fetches it)"
    return Blob(SMOLLM2)


@pytest.fixture()
def mocks():
    cdn = Cdn()
    hub = MockHub(cdn)
    ollama = MockOllama(cdn)
    yield hub, ollama, cdn
    for s in (hub, ollama, cdn):
        s.close()


class Env:
    """A clean HOME (so every default cache path is under it) and the mocks' addresses."""

    def __init__(self, tmp, hub=None, ollama=None):
        self.home = os.path.join(tmp, "home")
        os.makedirs(self.home, exist_ok=True)
        self.vars = {k: v for k, v in os.environ.items()
                     if not k.startswith(("HF_", "HUGGINGFACE_", "MINFER_OLLAMA", "OLLAMA_", "XDG_CACHE"))}
        self.vars.update({"HOME": self.home, "MINFER_MODEL_DIR": os.path.join(self.home, "models"),
                          "MINFER_HTTP_RETRY_MS": "20", "MINFER_PROGRESS_SECONDS": "0.5",
                          "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1"})
        if hub is not None:
            self.vars["HF_ENDPOINT"] = hub.endpoint
        if ollama is not None:
            self.vars["MINFER_OLLAMA_REGISTRY"] = ollama.url

    @property
    def hf_cache(self):
        return os.path.join(self.home, ".cache", "huggingface", "hub")

    def run(self, *args, timeout=300, check=None, **kw):
        env = dict(self.vars)
        env.update(kw.pop("env", {}))
        r = subprocess.run([MINFER, *args], capture_output=True, text=True, env=env, timeout=timeout, **kw)
        if check is not None:
            assert (r.returncode == 0) == check, f"minfer {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def popen(self, *args, **kw):
        env = dict(self.vars)
        env.update(kw.pop("env", {}))
        return subprocess.Popen([MINFER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)


@pytest.fixture()
def env_factory(tmp_path):
    def make(hub=None, ollama=None):
        return Env(str(tmp_path), hub, ollama)
    return make


def fake_gguf(tag, size=4096):
    """Bytes that start like a GGUF file, distinct per tag (download tests never load these)."""
    body = (b"GGUF" + tag.encode() * (size // max(1, len(tag)))) [:size]
    return body
