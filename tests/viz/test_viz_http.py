"""minfer viz over HTTP: the page and its assets, /viz/graph against --dump-graph-json,
/viz/run (greedy text equal to the CLI's, bad input), /viz/events (one node event per computed
node per step, concurrent pages, a page that closes mid-run or never reads), MINFER_TRACE."""
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest
import requests

from conftest import MINFER, SMOLLM2, Viz, cli_reply


def events(url, stop_on="finish", timeout=120, out=None):
    """The JSON events of one /viz/events connection until `stop_on` (list appended in `out`)."""
    got = out if out is not None else []
    with requests.get(url + "/viz/events", stream=True, timeout=timeout) as r:
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        for raw in r.iter_lines():  # SSE is UTF-8 whatever the headers say
            line = raw.decode("utf-8")
            if line.startswith("data: "):  # one event, or a batch of them (an array)
                data = json.loads(line[6:])
                batch = data if isinstance(data, list) else [data]
                got.extend(batch)
                if any(e["type"] == stop_on for e in batch):
                    break
    return got


def listen(url, n=1):
    """n pages listening in the background; returns (threads, lists), once all are connected."""
    lists = [[] for _ in range(n)]
    threads = [threading.Thread(target=events, args=(url,), kwargs={"out": lst}, daemon=True) for lst in lists]
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while time.time() < deadline and not all(any(e["type"] == "hello" for e in lst) for lst in lists):
        time.sleep(0.05)
    return threads, lists


def test_page_and_assets_are_embedded_and_offline(viz):
    r = requests.get(viz.url + "/")
    assert r.status_code == 200 and "text/html" in r.headers["Content-Type"]
    assert '<script src="app.js">' in r.text and "http" not in r.text
    for asset, ctype in (("app.js", "javascript"), ("graph.js", "javascript"), ("operators.js", "javascript"), ("style.css", "text/css")):
        a = requests.get(f"{viz.url}/{asset}")
        assert a.status_code == 200 and ctype in a.headers["Content-Type"] and len(a.text) > 1000
        text = a.text.replace("http://www.w3.org/2000/svg", "")  # a namespace name, not a download
        assert "https://" not in text and "http://" not in text, f"{asset} must not load anything from the network"
    assert requests.get(viz.url + "/nope").status_code == 404


def test_graph_has_the_ids_of_dump_graph_json(viz, tmp_path):
    g = requests.get(viz.url + "/viz/graph").json()
    for kind in ("prefill", "decode"):
        assert g[kind]["format"] == "minfer-graph" and g[kind]["kind"] == kind
    out = tmp_path / "prefill.json"
    r = subprocess.run([MINFER, SMOLLM2, "What is the capital of France?", "--dump-graph-json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    dumped = json.loads(out.read_text())
    key = lambda n: (n["id"], n["name"], n["op"], n["dtype"])  # noqa: E731
    assert [key(n) for n in g["prefill"]["nodes"]] == [key(n) for n in dumped["nodes"]]
    assert len(g["decode"]["nodes"]) < len(g["prefill"]["nodes"])  # no tail gather in decode
    # Decode: the graph `minfer logits --tokens 1 --dump-graph-json` writes, shapes included (one
    # token; what Shape flow shows for decode).
    out = tmp_path / "decode.json"
    r = subprocess.run([MINFER, "logits", SMOLLM2, "--tokens", "1", "-c", str(g["decode"]["params"]["n_ctx"]),
                        "--dump-graph-json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    dumped = json.loads(out.read_text())
    assert dumped["kind"] == "decode" and dumped["params"]["n_tokens"] == 1
    shaped = lambda n: (*key(n), tuple(n["shape"]))  # noqa: E731
    assert [shaped(n) for n in g["decode"]["nodes"]] == [shaped(n) for n in dumped["nodes"]]


@pytest.mark.parametrize("body,status,param", [
    ("{not json", 400, None), ("[1, 2]", 400, None), ("{}", 400, "prompt"), ('{"prompt": ""}', 400, "prompt"),
    ('{"prompt": 3}', 400, "prompt"), ('{"prompt": "hi", "max_tokens": -2}', 400, "max_tokens"),
    ('{"prompt": "hi", "max_tokens": "x"}', 400, "max_tokens"), ('{"prompt": "hi", "temperature": -1}', 400, "temperature"),
    ('{"prompt": "hi", "seed": -5}', 400, "seed"), ('{"prompt": "hi", "max_tokens": 2147483648}', 400, "max_tokens"), ('{"prompt": "hi", "top_p": 1.5}', 400, "top_p"),
])
def test_bad_run_requests_are_400(viz, body, status, param):
    r = requests.post(viz.url + "/viz/run", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"] == "invalid_request_error"
    if param:
        assert err["param"] == param


def test_run_answers_as_the_cli_and_streams_every_node(viz):
    prompt, n = "What is the capital of France?", 6
    want = cli_reply(prompt, n)
    unwatched = requests.post(viz.url + "/viz/run", json={"prompt": prompt, "max_tokens": n, "temperature": 0}).json()
    assert unwatched["text"] == want and unwatched["captured"] is False  # nobody listening: no capture
    threads, lists = listen(viz.url, 3)
    r = requests.post(viz.url + "/viz/run", json={"prompt": prompt, "max_tokens": n, "temperature": 0, "seed": 1})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["text"] == want and j["captured"] is True and j["completion_tokens"] == n and j["finish_reason"] == "length"
    for t in threads:
        t.join(timeout=60)
    g = requests.get(viz.url + "/viz/graph").json()
    ids = {k: {nd["id"] for nd in g[k]["nodes"]} for k in ("prefill", "decode")}
    for evs in lists:  # every page saw the same run
        kinds = [e["type"] for e in evs]
        assert kinds[0] == "hello" and "start" in kinds and kinds[-1] == "finish"
        steps = [e for e in evs if e["type"] == "step"]
        assert [s["phase"] for s in steps] == ["prefill"] + ["decode"] * (n - 1)
        nodes = [e for e in evs if e["type"] == "node"]
        per_step = {}
        for e in nodes:
            per_step.setdefault(e["step"], []).append(e["id"])
        assert sorted(per_step) == list(range(n))
        for step, got in per_step.items():
            phase = "prefill" if step == 0 else "decode"
            assert set(got) <= ids[phase] and len(got) == len(set(got)), step
            assert len(got) > 100  # every computed node of SmolLM2's graph
        assert len(per_step[1]) == len(per_step[2])
        logits = [e for e in nodes if e["name"] == "result_output"]
        assert logits and all(e["shape"][0] == 49152 and e["stats"]["max"] >= e["stats"]["min"] for e in logits)
        tokens = [e for e in evs if e["type"] == "token"]
        assert len(tokens) == n and "".join(t["text"] for t in tokens) == want
        for t in tokens:  # the model's own distribution (before the sampler's penalties)
            ps = [p for _, _, p in t["top"]]
            assert len(ps) == 5 and ps == sorted(ps, reverse=True) and 0 < sum(ps) <= 1.000001
        assert evs[-1]["text"] == want


def test_pages_that_close_or_never_read_do_not_stall_the_run(viz):
    # A page that reads the first events and goes away.
    with requests.get(viz.url + "/viz/events", stream=True, timeout=30) as r:
        next(r.iter_lines())
    # A page that connects and never reads: its socket buffer fills, its queue overflows.
    u = urllib.parse.urlsplit(viz.url)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.connect((u.hostname, u.port))
    s.sendall(b"GET /viz/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(0.3)
    t0 = time.time()
    r = requests.post(viz.url + "/viz/run", json={"prompt": "Tell me a story.", "max_tokens": 48, "temperature": 0}, timeout=120)
    assert r.status_code == 200 and r.json()["completion_tokens"] == 48
    print(f"\nwatched 48-token run with a page that never reads: {time.time() - t0:.1f} s")
    assert time.time() - t0 < 60
    # Now read: the stream says what it lost.
    s.settimeout(5)
    data = b""
    try:
        while b'"type":"lagged"' not in data and len(data) < 64 << 20:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    s.close()
    assert b'"type":"lagged"' in data
    # Still healthy: another run (watched: a page listens, so capture makes it last), while a
    # second one is refused as busy.
    threads, _ = listen(viz.url, 1)
    results = {}
    def long_run():
        results["a"] = requests.post(viz.url + "/viz/run", json={"prompt": "Count to one hundred.", "max_tokens": 64,
                                                                  "temperature": 0})
    t = threading.Thread(target=long_run)
    t.start()
    time.sleep(0.3)
    busy = requests.post(viz.url + "/viz/run", json={"prompt": "hi", "max_tokens": 2})
    t.join()
    assert busy.status_code == 409 and busy.json()["error"]["type"] == "busy"
    assert results["a"].status_code == 200


def test_minfer_trace_file_and_its_replay_endpoint(viz, tmp_path):
    trace = tmp_path / "run.trace.json"
    r = subprocess.run([MINFER, SMOLLM2, "What is the capital of France?", "-n", "4", "--temp", "0", "-t", "2"],
                       capture_output=True, text=True, env={**os.environ, "MINFER_TRACE": str(trace)}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[trace]" in r.stderr
    t = json.loads(trace.read_text())
    assert t["format"] == "minfer-trace" and t["version"] == 1
    ids = {k: {n["id"] for n in t["graphs"][k]["nodes"]} for k in ("prefill", "decode")}
    nodes = [e for e in t["events"] if e["type"] == "node"]
    assert {e["id"] for e in nodes if e["step"] == 0} <= ids["prefill"]
    assert {e["id"] for e in nodes if e["step"] > 0} <= ids["decode"]
    assert "".join(e["text"] for e in t["events"] if e["type"] == "token") == r.stdout
    assert t["events"][-1] == {"type": "finish", "text": r.stdout, "finish_reason": "length", "completion_tokens": 4}
    served = requests.get(viz.url + "/viz/trace", params={"path": str(trace)})
    assert served.status_code == 200 and served.json()["events"] == t["events"]
    assert requests.get(viz.url + "/viz/trace", params={"path": str(tmp_path / "none.json")}).status_code == 404
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    assert requests.get(viz.url + "/viz/trace", params={"path": str(other)}).status_code == 400
    assert requests.get(viz.url + "/viz/trace").status_code == 400


def outbound_address():
    """This machine's address on its default route (not loopback), or None."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            a = s.getsockname()[0]
        except OSError:
            return None
    return None if a.startswith("127.") else a


def test_trace_files_are_served_only_to_this_machine(tmp_path):
    """/viz/trace reads the server's files: a client on another address gets 403, not the file."""
    trace = tmp_path / "t.json"
    trace.write_text('{"format": "minfer-trace", "version": 1, "events": []}')
    addr = outbound_address()
    assert addr, "no non-loopback IPv4 address to test from"
    graph = tmp_path / "g.json"
    graph.write_text('{"format": "minfer-graph", "nodes": []}')
    v = Viz("--host", "0.0.0.0", "--graph", str(graph), model=None)
    port = v.url.rsplit(":", 1)[1]
    try:
        local = requests.get(f"http://127.0.0.1:{port}/viz/trace", params={"path": str(trace)})
        assert local.status_code == 200 and local.json()["format"] == "minfer-trace"
        remote = requests.get(f"http://{addr}:{port}/viz/trace", params={"path": str(trace)})
        assert remote.status_code == 403 and "minfer-trace" not in remote.text, remote.text
    finally:
        assert v.stop() == 0


def test_graph_file_is_served_without_a_model(tmp_path):
    """`minfer viz --graph FILE.json [--graph DECODE.json]`: each export the phase its kind says (no
    decode faked from prefill), nothing to run; bad files refused."""
    out = tmp_path / "prefill.json"
    r = subprocess.run([MINFER, SMOLLM2, "Hi", "--dump-graph-json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    dec = tmp_path / "decode.json"
    r = subprocess.run([MINFER, "logits", SMOLLM2, "--tokens", "1", "--dump-graph-json", str(dec)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    v = Viz("--graph", str(out), model=None)
    try:
        g = requests.get(v.url + "/viz/graph").json()
        assert g["prefill"] == json.loads(out.read_text()) and "decode" not in g
    finally:
        assert v.stop() == 0
    v = Viz("--graph", str(out), "--graph", str(dec), model=None)
    try:
        g = requests.get(v.url + "/viz/graph").json()
        dumped = json.loads(out.read_text())
        assert g["prefill"] == dumped and g["decode"] == json.loads(dec.read_text()) and g["runnable"] is False
        run = requests.post(v.url + "/viz/run", json={"prompt": "Hi"})
        assert run.status_code == 400 and "--graph" in run.json()["error"]["message"]
        assert requests.get(v.url + "/").status_code == 200
    finally:
        assert v.stop() == 0
    # Refused with a message naming the file and exit code 1 (an uncaught exception would abort: 134).
    bads = ['{"format": "something-else"}', '{"format": 1}', '{"format": "minfer-graph", "nodes": 5}',
            '{"prefill": {"nodes": []}, "decode": 5}', '[1, 2]']
    for i, text in enumerate(bads):
        bad = tmp_path / f"bad{i}.json"
        bad.write_text(text)
        r = subprocess.run([MINFER, "viz", "--graph", str(bad), "--port", "0"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and str(bad) in r.stderr, (text, r.returncode, r.stderr)
    for args in (["--graph", str(tmp_path / "none.json")], [], [SMOLLM2, "--graph", str(out)],
                 ["--graph", str(out), "--graph", str(out)]):
        r = subprocess.run([MINFER, "viz", *args, "--port", "0"], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and r.stderr, args
    # One value per --graph: a MODEL after it stays the positional (both given: refused as such).
    r = subprocess.run([MINFER, "viz", "--graph", str(out), SMOLLM2, "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "one of them" in r.stderr, r.stderr


def test_samples_are_listed_and_served(tmp_path):
    """--samples DIR: /viz/samples lists its exports, /samples/NAME serves one, other names refused."""
    d = tmp_path / "samples"
    d.mkdir()
    (d / "llama.json").write_text('{"format": "minfer-graph", "nodes": []}')
    (d / "notes.txt").write_text("not a sample")
    (d / ".hidden.json").write_text("{}")
    (d / "folder.json").mkdir()
    (tmp_path / "secret.json").write_text('{"secret": true}')  # beside the folder: never served
    v = Viz("--samples", str(d))
    try:
        assert requests.get(v.url + "/viz/samples").json() == {"samples": ["llama.json"]}
        assert requests.get(v.url + "/samples/llama.json").json()["format"] == "minfer-graph"
        assert requests.get(v.url + "/samples/none.json").status_code == 404
        assert requests.get(v.url + "/samples/folder.json").status_code == 404
        for name in ("..%2Fsecret.json", "notes.txt", ".hidden.json", "a%5Cb.json"):
            r = requests.get(v.url + "/samples/" + name)
            assert r.status_code == 400 and '"secret": true' not in r.text, (name, r.status_code, r.text)
        assert requests.get(v.url + "/samples/a/b.json").status_code in (400, 404)
    finally:
        assert v.stop() == 0


def test_requests_for_another_host_name_are_refused(tmp_path):
    """DNS-rebinding guard: a Host that is not a loopback name, an IP address or --host gets 403
    before any handler runs (a page of evil.example whose name resolves to 127.0.0.1)."""
    graph = tmp_path / "g.json"
    graph.write_text('{"format": "minfer-graph", "nodes": []}')
    v = Viz("--graph", str(graph), model=None)
    port = v.url.rsplit(":", 1)[1]
    try:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", f"viz.localhost:{port}"):
            assert requests.get(v.url + "/viz/graph", headers={"Host": host}).status_code == 200, host
        for host in (f"[::1]:{port}", "[::ffff:127.0.0.1]", f"LOCALHOST:{port}"):
            assert requests.get(v.url + "/viz/graph", headers={"Host": host}).status_code == 200, host
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", "localhost.evil.example", "",
                     f"[evil.example]:{port}", "[localhost]", "[::1", "[::1]x", "[]"):
            for path in ("/", "/viz/graph", "/viz/events", "/viz/samples"):
                r = requests.get(v.url + path, headers={"Host": host}, stream=True, timeout=10)
                assert r.status_code == 403 and "permission_error" in r.text, (host, path, r.status_code)
            r = requests.post(v.url + "/viz/run", json={"prompt": "Hi"}, headers={"Host": host})
            assert r.status_code == 403, (host, r.status_code)
    finally:
        assert v.stop() == 0
    # --host compared without case (the Host header is lowercased): a name of this machine given
    # in capitals.
    name = socket.gethostname()
    try:
        socket.getaddrinfo(name.upper(), None)
    except OSError:
        return
    v = Viz("--graph", str(graph), "--host", name.upper(), model=None)
    try:
        port = v.url.rsplit(":", 1)[1]
        for host in (f"{name.upper()}:{port}", f"{name.lower()}:{port}"):
            assert requests.get(v.url + "/viz/graph", headers={"Host": host}).status_code == 200, host
    finally:
        assert v.stop() == 0
