"""deploy/kubernetes/: every manifest valid (validate-kubernetes.py: Kubernetes' own schemas from
PyPI's kubernetes-validate, the vendored InferencePool schema), broken copies refused, the pieces
agreeing with each other (labels, ports, probes on /health, a grace period that covers the
drain), and the Deployment's command line accepted by `minfer serve`: it answers /health and the
router gauges on /metrics, and exits 0 on SIGTERM."""
import importlib.util
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
VALIDATE = pathlib.Path(__file__).resolve().parent / "validate-kubernetes.py"
BIN = os.environ.get("MINFER_BIN", str(ROOT / "build" / "bin" / "minfer"))
MODEL = os.environ.get("MINFER_SMOLLM2", os.path.expanduser("~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf"))


_spec = importlib.util.spec_from_file_location("validate_kubernetes", VALIDATE)
validator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(validator)


def validate(path, capsys):
    """The validator run in this process (its schemas are read once): (exit code, stdout, stderr)."""
    capsys.readouterr()
    rc = validator.main([str(path)])
    out, err = capsys.readouterr()
    return rc, out, err


def load(name):
    return yaml.safe_load((DEPLOY / name).read_text())


def container():
    return load("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]


def arg(args, flag):
    return args[args.index(flag) + 1]


def test_every_manifest_is_valid(capsys):
    rc, out, err = validate(DEPLOY, capsys)
    assert rc == 0, out + err
    assert "4 documents, 0 invalid" in out


BROKEN = {
    # (file, text replaced, by): what a schema refuses
    "misspelled field": ("deployment.yaml", "readinessProbe:", "readynessProbe:"),
    "wrong type": ("deployment.yaml", "replicas: 2", "replicas: two"),
    "probe without a handler port": ("deployment.yaml", "              port: http\n            periodSeconds: 5",
                                     "              port: [http]\n            periodSeconds: 5"),
    "service port as text": ("service.yaml", "port: 8080", "port: \"8080\""),
    "pool without targetPorts": ("inference-gateway/inferencepool.yaml", "targetPorts:\n    - number: 8080\n", ""),
    "pool port out of range": ("inference-gateway/inferencepool.yaml", "number: 8080", "number: 80800"),
    "pool with an unknown field": ("inference-gateway/inferencepool.yaml", "  targetPorts:", "  targetPort: 1\n  targetPorts:"),
    "unknown kind": ("service.yaml", "kind: Service", "kind: Servise"),
    "not YAML": ("models-pvc.yaml", "  accessModes:", "  accessModes: [\n"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_copy_is_refused(case, tmp_path, capsys):
    name, old, new = BROKEN[case]
    copy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, copy)
    text = (copy / name).read_text()
    assert old in text, f"{case}: {old!r} not in {name}"
    (copy / name).write_text(text.replace(old, new, 1))
    rc, out, err = validate(copy, capsys)
    assert rc == 1, f"{case}: accepted\n{out}{err}"
    assert name.split("/")[-1] in err


def test_pieces_agree():
    dep = load("deployment.yaml")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    svc = load("service.yaml")
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    pool = load("inference-gateway/inferencepool.yaml")
    assert pool["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    c = container()
    port = int(arg(c["args"], "--port"))
    assert [p["containerPort"] for p in c["ports"] if p["name"] == "http"] == [port]
    assert [p["number"] for p in pool["spec"]["targetPorts"]] == [port]
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert "--metrics" in c["args"]  # the endpoint picker scrapes /metrics
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health" and c[probe]["httpGet"]["port"] == "http", probe


def test_grace_period_covers_the_drain():
    """preStop, then SIGTERM: --drain-timeout for in-flight requests, then up to 10 s more for a
    reply that cannot be written (src/server/http-server.cpp listen_and_drain)."""
    spec = load("deployment.yaml")["spec"]["template"]["spec"]
    c = container()
    pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = float(arg(c["args"], "--drain-timeout"))
    assert spec["terminationGracePeriodSeconds"] >= pre_stop + drain + 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_deployment_command_line_serves_and_drains(tmp_path):
    assert os.path.exists(BIN), f"MINFER_BIN {BIN} does not exist"
    models = tmp_path / "models"
    models.mkdir()
    os.symlink(MODEL, models / "smollm2.gguf")
    args = list(container()["args"])
    port = free_port()
    args[args.index("--models-dir") + 1] = str(models)
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([BIN, *args], stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert time.time() < deadline, log.read_text()
                time.sleep(0.1)
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
            assert f"{name} 0\n" in text, name
        assert 'minfer_model_loaded{model="smollm2"} 0\n' in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
