"""End-to-end tests of `minfer MODEL PROMPT` and `minfer perplexity` on SmolLM2-135M-Instruct."""
import json
import os
import subprocess

import pytest

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
ORACLE = os.environ.get("MINFER_LLAMA_ORACLE", "")


def run(*args, stdin=None):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, input=stdin, timeout=300)


def test_greedy_is_deterministic_and_reports_speeds():
    a = run(MODEL, "What is the capital of France?", "--temp", "0", "-n", "24")
    b = run(MODEL, "What is the capital of France?", "--greedy", "-n", "24")
    assert a.returncode == 0, a.stderr
    assert a.stdout and a.stdout == b.stdout
    assert "[prompt]" in a.stderr and "tok/s" in a.stderr and "[generate]" in a.stderr


def test_seed_reproduces_and_differs():
    a = run(MODEL, "Tell me a story.", "--seed", "1", "-n", "24", "--temp", "1.2")
    b = run(MODEL, "Tell me a story.", "--seed", "1", "-n", "24", "--temp", "1.2")
    c = run(MODEL, "Tell me a story.", "--seed", "2", "-n", "24", "--temp", "1.2")
    assert a.returncode == 0 and a.stdout == b.stdout
    assert a.stdout != c.stdout


def test_n_predict_limits_generation():
    r = run(MODEL, "Count from one to one hundred.", "--temp", "0", "-n", "5", "--ignore-eos")
    assert r.returncode == 0, r.stderr
    assert "[generate] 5 tokens" in r.stderr and "stop: length" in r.stderr


def test_n_predict_zero_reads_the_prompt_only():
    r = run(MODEL, "Count from one to one hundred.", "--temp", "0", "-n", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "" and "[generate] 0 tokens" in r.stderr and "[prompt]" in r.stderr


def test_a_wrong_model_name_is_reported_before_reading_stdin():
    # stdin stays open and empty: the old order read it (forever) before looking at the name.
    p = subprocess.Popen([MINFER, "no-such-model-name"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        p.wait(timeout=30)  # stdin is not closed meanwhile
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError("minfer waited for stdin before resolving the model")
    _, err = p.communicate()
    assert p.returncode == 1 and "no model named" in err, err


def test_stop_string_cuts_the_reply():
    full = run(MODEL, "What is the capital of France?", "--temp", "0", "-n", "24").stdout
    assert len(full) > 6
    stop = full[3:6]
    r = run(MODEL, "What is the capital of France?", "--temp", "0", "-n", "24", "--stop", stop)
    assert r.returncode == 0, r.stderr
    assert r.stdout == full[: full.index(stop)]
    assert "stop: stop" in r.stderr


def test_prompt_from_stdin_and_no_template():
    a = run(MODEL, "--temp", "0", "-n", "8", stdin="Hello")
    b = run(MODEL, "Hello", "--temp", "0", "-n", "8")
    assert a.returncode == 0 and a.stdout == b.stdout
    raw = run(MODEL, "The capital of France is", "--no-template", "--temp", "0", "-n", "8")
    assert raw.returncode == 0 and raw.stdout


def test_bad_input_is_refused():
    for args, msg in [(["hi", "--temp", "-1"], "--temp -1 must be a finite value >= 0"), (["hi", "--top-p", "2"], "--top-p 2 must be in [0, 1]"),
                      (["hi there, how are you today?", "-c", "16"], "context"),
                      (["hi", "--logit-bias", "99999999:1"], "logit_bias"),
                      (["hi", "--kv-type", "q9"], "kv-type")]:
        r = run(MODEL, *args)
        assert r.returncode != 0, args
        assert msg in r.stderr, (args, r.stderr)
    r = run("no-such-model-name", "hi")
    assert r.returncode == 1 and "no model named" in r.stderr


def test_dump_graph_json(tmp_path):
    p = tmp_path / "g.json"
    r = run(MODEL, "hi", "--dump-graph-json", str(p))
    assert r.returncode == 0, r.stderr
    g = json.loads(p.read_text())
    names = {n["name"] for n in g["nodes"]}
    assert "blk.0.attn_norm" in " ".join(names) or any(n.startswith("blk.0.") for n in names)


def test_perplexity_matches_llama_cpp_on_two_chunks(tmp_path):
    assert os.path.isfile(ORACLE), f"MINFER_LLAMA_ORACLE={ORACLE!r} is not built"
    text = tmp_path / "t.txt"
    text.write_text(open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read())
    r = run("perplexity", MODEL, "-f", str(text), "-c", "256", "--chunks", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PPL = ")
    ours = json.loads(r.stdout.strip().splitlines()[-1])
    ref = subprocess.run([ORACLE, "perplexity", MODEL, "-f", str(text), "-c", "256", "--chunks", "2"],
                         capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    ref = json.loads(ref.stdout.strip().splitlines()[-1])
    assert ours["n_scored"] == ref["n_scored"]
    rel = abs(ours["ppl"] - ref["ppl"]) / ref["ppl"]
    print(f"\nperplexity (2 chunks of 256): minfer {ours['ppl']:.4f}, llama.cpp {ref['ppl']:.4f}, {100 * rel:.3f}%")
    # 254 scored tokens: per-token noise from activation quantization does not average out
    # here; the 0.5% bound of the issue applies to the full 24k-token run (check_smollm2.py).
    assert rel < 0.02
