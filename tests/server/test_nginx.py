"""deploy/nginx/nginx.conf, run as shipped (only its ports changed), in front of two
`minfer serve` instances: streams and errors pass through unchanged and both instances serve."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

import openai

from conftest import ServerProcess, free_port, metric

HERE = os.path.dirname(os.path.abspath(__file__))
CONF = os.path.join(HERE, "../../deploy/nginx/nginx.conf")


def test_nginx_load_balancer():
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.path.exists(nginx), "nginx is not installed (scripts/setup.sh installs nginx-light)"
    a = ServerProcess("--parallel", "2", "-c", "1024", "-t", "1")
    b = ServerProcess("--parallel", "2", "-c", "1024", "-t", "1")
    prefix = tempfile.mkdtemp(prefix="minfer-nginx-")
    port = free_port()
    conf = open(CONF).read()
    for old, new in (("127.0.0.1:8081", f"127.0.0.1:{a.port}"), ("127.0.0.1:8082", f"127.0.0.1:{b.port}"),
                     ("listen 127.0.0.1:8080", f"listen 127.0.0.1:{port}")):
        assert old in conf
        conf = conf.replace(old, new)
    with open(os.path.join(prefix, "nginx.conf"), "w") as f:
        f.write(conf)
    proc = subprocess.Popen([nginx, "-p", prefix, "-c", os.path.join(prefix, "nginx.conf"), "-g", "daemon off;"],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.1)
        via = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        direct = openai.OpenAI(base_url=a.url + "/v1", api_key="none", max_retries=0)
        msgs = [{"role": "user", "content": "Name three colors."}]
        want = direct.chat.completions.create(model="m", messages=msgs, temperature=0, max_tokens=16)
        chunks = list(via.chat.completions.create(model="m", messages=msgs, temperature=0, max_tokens=16, stream=True))
        assert chunks[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == want.choices[0].message.content
        try:
            via.chat.completions.create(model="m", messages=msgs, temperature=-1)
            raise AssertionError("expected 400")
        except openai.BadRequestError as e:
            assert e.body["param"] == "temperature"
        before = [metric(s.url, "minfer_generated_tokens_total") for s in (a, b)]
        errors = []

        def run():
            try:
                s = via.chat.completions.create(model="m", messages=msgs, max_tokens=12, stream=True)
                assert "".join(c.choices[0].delta.content or "" for c in s)
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        after = [metric(s.url, "minfer_generated_tokens_total") for s in (a, b)]
        assert after[0] > before[0] and after[1] > before[1], "least_conn should spread 4 streams over both"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert a.stop() == 0 and b.stop() == 0
        shutil.rmtree(prefix, ignore_errors=True)
