import os
import re
import subprocess
import time

import pytest

MINFER = os.environ.get("MINFER_BIN", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")


class Viz:
    """`minfer viz MODEL --port 0`, its address read from its first stderr line."""

    def __init__(self, *extra, env=None, model=SMOLLM2):
        """model=None: no model (extra gives --graph FILE)."""
        assert model is None or os.path.isfile(model), f"MINFER_SMOLLM2={model!r} missing"
        model_args = [model] if model else []
        self.p = subprocess.Popen([MINFER, "viz", *model_args, "--port", "0", "-t", "2", *extra], stderr=subprocess.PIPE,
                                  text=True, env={**os.environ, **(env or {})})
        deadline = time.time() + 60
        line = ""
        while time.time() < deadline:
            line = self.p.stderr.readline()
            m = re.search(r"on (http://[^\s/]+:\d+)/", line)  # an address or a --host name
            if m:
                self.url = m.group(1)
                return
            if self.p.poll() is not None:
                break
        raise RuntimeError(f"minfer viz did not start: {line}")

    def stop(self):
        self.p.terminate()
        try:
            return self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise


@pytest.fixture(scope="module")
def viz():
    v = Viz()
    yield v
    assert v.stop() == 0


def cli_reply(prompt, n):
    """What the one-shot CLI answers, greedy: the reference for the page and /viz/run."""
    r = subprocess.run([MINFER, SMOLLM2, prompt, "-n", str(n), "--temp", "0", "-t", "2"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout
