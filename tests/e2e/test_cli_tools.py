"""End-to-end tests of the tool commands' argument handling (`tokenize`, `quantize`, `info`) on SmolLM2."""
import json
import os
import subprocess

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")


def run(*args):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, timeout=600)


def test_tokenize_joins_words_as_the_main_command_does():
    words = run("tokenize", MODEL, "Hello", "world,", "again")
    one = run("tokenize", MODEL, "Hello world, again")
    assert words.returncode == 0 and one.returncode == 0, (words.stderr, one.stderr)
    assert words.stdout == one.stdout and len(words.stdout.split()) >= 3


def test_quantize_takes_the_type_in_any_case(tmp_path):
    out = tmp_path / "q.gguf"
    r = run("quantize", MODEL, str(out), "q8_0", "-t", "2")
    assert r.returncode == 0, r.stderr
    info = run("info", str(out))
    assert info.returncode == 0 and "Q8_0" in info.stdout, info.stdout
    bad = run("quantize", MODEL, str(tmp_path / "x.gguf"), "q9_z")
    assert bad.returncode == 1 and "unknown type 'Q9_Z'" in bad.stderr, bad.stderr


def test_info_json_no_vocab_leaves_out_only_the_vocabulary_arrays():
    full = run("info", MODEL, "--json")
    lean = run("info", MODEL, "--json", "--no-vocab")
    assert full.returncode == 0 and lean.returncode == 0, (full.stderr, lean.stderr)
    f, l = json.loads(full.stdout), json.loads(lean.stdout)
    vocab = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}  # SmolLM2 has no scores
    assert vocab <= f["metadata"].keys() and not vocab & l["metadata"].keys()
    assert l["vocab_lengths"] == {k: len(f["metadata"][k]) for k in vocab}
    assert {k: v for k, v in f["metadata"].items() if k not in vocab} == l["metadata"]
    assert f["metadata_types"] == l["metadata_types"] and f["tensors"] == l["tensors"]
    assert len(lean.stdout) * 10 < len(full.stdout)
    alone = run("info", MODEL, "--no-vocab")
    assert alone.returncode == 1 and "--json" in alone.stderr
