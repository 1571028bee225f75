"""Starts `minfer serve` on a free loopback port for the server tests and stops it (SIGTERM,
which must drain and exit 0).

Environment: MINFER_BIN (the binary), MINFER_SMOLLM2 (the GGUF model).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

BIN = os.environ.get("MINFER_BIN", "build/bin/minfer")
MODEL = os.environ.get("MINFER_SMOLLM2", os.path.expanduser("~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, *extra, model=None, models=None, metrics=True, env=None):
        """`model`: another GGUF to serve (default: MODEL, SmolLM2, called "smollm2"); `models`: a
        list of MODEL arguments instead (a pool: none, one or several, no --alias); `metrics`: pass
        --metrics; `env`: more environment variables (a value "{port}" is the server's port)."""
        model = model or MODEL
        assert os.path.exists(BIN), f"MINFER_BIN {BIN} does not exist"
        assert models is not None or os.path.exists(model), f"model {model} does not exist (run scripts/setup.sh)"
        served = [*models] if models is not None else [model, "--alias", "smollm2"]
        # free_port() only finds a port that was free a moment ago: another test's server may
        # take it first. Ours is the one that answers only once its own log says it listens; a
        # server that could not bind is retried on another port.
        for _attempt in range(3):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.log = open(f"/tmp/minfer-serve-{self.port}.log", "w+")
            self.proc = subprocess.Popen([BIN, "serve", *served, "--host", "127.0.0.1", "--port", str(self.port),
                                          *(["--metrics"] if metrics else []), *extra],
                                         stdout=self.log, stderr=subprocess.STDOUT,
                                         env={**os.environ, **{k: v.replace("{port}", str(self.port)) for k, v in (env or {}).items()}})
            deadline = time.time() + 60
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    if "cannot listen on" in self.read_log():
                        break  # the port was taken meanwhile: another one
                    raise AssertionError(f"server exited: {self.read_log()}")
                if f"listening on http://127.0.0.1:{self.port}" not in self.read_log():
                    time.sleep(0.05)
                    continue
                try:
                    with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                        if r.status == 200:
                            return
                except OSError:
                    time.sleep(0.1)
            else:
                raise AssertionError(f"server did not become healthy: {self.read_log()}")
        raise AssertionError(f"no free port in 3 attempts: {self.read_log()}")

    def read_log(self):
        # A file object of its own: seeking the one the server writes through would move the
        # server's write offset too (they share it), and its next line would overwrite the start.
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        """SIGTERM: in-flight requests finish, then exit code 0."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("server did not exit within 60 s of SIGTERM")
        return rc


@pytest.fixture(scope="session")
def server():
    s = ServerProcess("--parallel", "4", "-c", "4096", "-t", "2")
    yield s
    rc = s.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {s.read_log()[-2000:]}"


@pytest.fixture(scope="session")
def strict_server():
    """One slot, no queue, an API key and a small body limit: for 401, 503 and 413."""
    s = ServerProcess("--parallel", "1", "--queue", "0", "-c", "256", "-t", "1", "--api-key", "sekret",
                      "--max-body-mb", "0.01")
    yield s
    rc = s.stop()
    assert rc == 0, f"exit code {rc} after SIGTERM: {s.read_log()[-2000:]}"


def post_json(url, path, body=None, timeout=300):
    """POSTs body as JSON (bytes go as they are) to url + path; returns (HTTP status, reply): the
    reply parsed when it is JSON, else its text (a stream)."""
    data = body if isinstance(body, bytes) else json.dumps(body if body is not None else {}).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read().decode()
    return status, (json.loads(raw) if raw.strip().startswith(("{", "[")) else raw)


def metric(url, name):
    """The value of the series `name`; where it has only labelled series (a pool: one per model),
    their sum."""
    labelled = None
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
            if line.startswith(name + "{"):
                labelled = (labelled or 0.0) + float(line.rsplit(" ", 1)[1])
    if labelled is None:
        raise AssertionError(f"metric {name} missing")
    return labelled


def join_clients(threads, seconds, failures):
    """Waits for the client threads of a mixed phase of `seconds`; none may hang, none may fail."""
    for t in threads:
        t.join(timeout=seconds + 180)
        assert not t.is_alive(), "a client thread is stuck (a request that never ends)"
    assert not failures, "\n".join(failures[:20])


def assert_idle(url, timeout=15):
    """After the clients are gone: no slot busy, nothing queued (/metrics), within `timeout` s."""
    t_end = time.time() + timeout
    while time.time() < t_end:
        if metric(url, "minfer_slots_busy") == 0 and metric(url, "minfer_queue_length") == 0:
            break
        time.sleep(0.2)
    assert metric(url, "minfer_slots_busy") == 0, "slots still busy on an idle server"
    assert metric(url, "minfer_queue_length") == 0, "jobs still queued on an idle server"


def run_node_test(script, url, package, modules_var):
    """Runs the node:test file `script` (next to this file) against the server at `url`, with the
    npm `package` from the folder named by the environment variable `modules_var` (scripts/setup.sh
    installs it under .deps/npm-PACKAGE); it sees MINFER_URL and that variable."""
    here = os.path.dirname(os.path.abspath(__file__))
    modules = os.environ.get(modules_var, os.path.join(here, f"../../.deps/npm-{package}/node_modules"))
    assert os.path.isdir(os.path.join(modules, package)), f"npm {package} missing in {modules} (scripts/setup.sh)"
    env = dict(os.environ, MINFER_URL=url, **{modules_var: os.path.abspath(modules)})
    r = subprocess.run(["node", "--test", "--test-reporter=spec", os.path.join(here, script)],
                       env=env, capture_output=True, text=True, timeout=400)
    print(r.stdout[-6000:])
    print(r.stderr[-3000:], file=sys.stderr)
    assert r.returncode == 0, "node client tests failed"
    assert "# fail 0" in r.stdout or "ℹ fail 0" in r.stdout
