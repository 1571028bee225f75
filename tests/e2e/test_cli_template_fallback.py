"""The chat template of a GGUF without tokenizer.chat_template, on the Gemma 3 270M GGUF we ship
for tests (general.architecture gemma3, no template): every front end (`chat-template`, `info`,
the one-shot CLI, `--cnv`, `serve`) uses the built-in Gemma template and says so; other
architectures keep ChatML (small GGUFs written here with gguf-py).

Environment: MINFER_BIN, MINFER_GEMMA3 (the model; missing fails, never skips).
"""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

MINFER = os.environ.get("MINFER_BIN", "")
GEMMA3 = os.environ.get("MINFER_GEMMA3", "")

SYSTEM_USER = {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
               "add_generation_prompt": True}
# Gemma's documented turn format for that conversation, with the model's BOS text.
GEMMA_PROMPT = "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
NOTICE = re.compile(r"has no tokenizer\.chat_template; using the built-in (\w+) template \(architecture (\w+)\)")


def need_model():
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(GEMMA3), f"MINFER_GEMMA3={GEMMA3!r} is missing (scripts/setup.sh fetches it)"


def run(*args, stdin=None, timeout=300):
    return subprocess.run([MINFER, *args], capture_output=True, text=True, input=stdin, timeout=timeout)


def chat_template(model, case):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(case, f)
    try:
        return run("chat-template", model, "--input", f.name)
    finally:
        os.unlink(f.name)


def notices(stderr):
    """(title, architecture) of every fallback notice line."""
    return [m.groups() for m in NOTICE.finditer(stderr)]


def token_ids(text):
    r = run("tokenize", GEMMA3, "--json", text)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_chat_template_command_uses_gemma_format():
    need_model()
    r = chat_template(GEMMA3, SYSTEM_USER)
    assert r.returncode == 0, r.stderr
    assert r.stdout == GEMMA_PROMPT, repr(r.stdout)
    assert notices(r.stderr) == [("Gemma", "gemma3")], r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    # The printed template of the model is the built-in one.
    a, b = run("chat-template", GEMMA3, "--print-template"), run("chat-template", "--builtin", "gemma", "--print-template")
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout and "<start_of_turn>" in a.stdout


def test_info_names_the_fallback():
    need_model()
    r = run("info", GEMMA3)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^chat template +absent \(the built-in Gemma template will be used\)$", r.stdout, re.M), r.stdout
    r = run("info", GEMMA3, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)["summary"]
    assert summary["architecture"] == "gemma3"
    assert summary["chat_template"] is False and summary["chat_template_fallback"] == "gemma", summary


def test_fallback_by_architecture():
    import gguf
    gemma = ("Gemma", GEMMA_PROMPT.replace("<bos>", ""))  # no tokens in these files: no BOS text
    chatml = ("ChatML", "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\n")
    expect = {"gemma": gemma, "gemma2": gemma, "gemma3": gemma, "gemma3n": gemma, "llama": chatml, "qwen3": chatml}
    with tempfile.TemporaryDirectory() as tmp:
        for arch, (title, prompt) in expect.items():
            path = os.path.join(tmp, f"{arch}.gguf")
            w = gguf.GGUFWriter(path, arch)
            w.add_string("general.name", "no template")
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            r = chat_template(path, SYSTEM_USER)
            assert r.returncode == 0, (arch, r.stderr)
            assert r.stdout == prompt, (arch, r.stdout)
            assert notices(r.stderr) == [(title, arch)], (arch, r.stderr)
            r = run("info", path)
            assert r.returncode == 0, (arch, r.stderr)
            assert f"absent (the built-in {title} template will be used)" in r.stdout, (arch, r.stdout)


def test_one_shot_prompt_is_gemma_with_one_bos():
    need_model()
    r = run(GEMMA3, "Hi", "--system", "You are terse.", "-n", "1", "--temp", "0", "-t", "2", "--verbose")
    assert r.returncode == 0, r.stderr
    assert notices(r.stderr) == [("Gemma", "gemma3")], r.stderr
    assert f"[prompt] {GEMMA_PROMPT}\n" in r.stderr, r.stderr
    ids = token_ids(GEMMA_PROMPT)
    assert ids[0] == 2 and ids.count(2) == 1, ids  # <bos> once: the runtime does not add a second
    m = re.search(r"\[prompt\] (\d+) tokens", r.stderr)
    assert m and int(m[1]) == len(ids), (r.stderr, ids)


def test_cnv_uses_gemma():
    need_model()
    r = run("--cnv", GEMMA3, "--system", "You are terse.", "-n", "4", "--temp", "0", "-t", "2", stdin="Hi\nAnd?\n")
    assert r.returncode == 0, r.stderr
    assert notices(r.stderr) == [("Gemma", "gemma3")], r.stderr
    turns = re.findall(r"\[turn\] prefill (\d+) tokens \((incremental|full render)\)", r.stderr)
    assert len(turns) == 2, r.stderr
    assert int(turns[0][0]) == len(token_ids(GEMMA_PROMPT)) and turns[0][1] == "full render", turns
    assert turns[1][1] == "incremental", turns


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_prompt_tokens(*extra):
    """Starts `serve GEMMA3 EXTRA...`, sends SYSTEM_USER, returns (usage.prompt_tokens, log)."""
    port = free_port()
    with tempfile.TemporaryFile("w+") as log:
        p = subprocess.Popen([MINFER, "serve", GEMMA3, "--host", "127.0.0.1", "--port", str(port), "-c", "512",
                              "-t", "2", *extra], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 120
            while True:
                assert p.poll() is None, "server exited"
                assert time.time() < deadline, "server did not become healthy"
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as h:
                        if h.status == 200:
                            break
                except OSError:
                    time.sleep(0.1)
            body = json.dumps({"messages": SYSTEM_USER["messages"], "max_tokens": 1, "temperature": 0}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as resp:
                usage = json.load(resp)["usage"]
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)
        log.seek(0)
        return usage["prompt_tokens"], log.read()


def test_serve_uses_gemma():
    need_model()
    n = len(token_ids(GEMMA_PROMPT))
    tokens, log = serve_prompt_tokens()
    assert notices(log) == [("Gemma", "gemma3")], log
    assert tokens == n, (tokens, n, log)
    tokens, log = serve_prompt_tokens("--chat-template", "gemma")
    assert "[server] chat template: the built-in Gemma template (--chat-template gemma)" in log, log
    assert notices(log) == [], log
    assert tokens == n, (tokens, n, log)
    r = run("serve", GEMMA3, "--chat-template", "gemma3")
    assert r.returncode == 1 and "(chatml, gemma, llama3," in r.stderr, r.stderr
