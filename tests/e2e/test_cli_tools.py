"""End-to-end tests of the tool commands' argument handling (`tokenize`, `quantize`, `info`) on SmolLM2."""
import json
import os
import re
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


def tensor_types(path):
    r = run("info", str(path), "--json", "--no-vocab")
    assert r.returncode == 0, r.stderr
    return {t["name"]: t["type"] for t in json.loads(r.stdout)["tensors"]}


def test_quantize_takes_the_type_in_any_case_and_asks_before_requantizing(tmp_path):
    out = tmp_path / "q.gguf"
    # SmolLM2's file is already Q4_1: like llama-quantize, converting it again needs a flag.
    r = run("quantize", MODEL, str(out), "q8_0", "-t", "2")
    assert r.returncode == 1 and "is already quantized (Q4_1)" in r.stderr and "--allow-requantize" in r.stderr, r.stderr
    assert not out.exists()
    r = run("quantize", MODEL, str(out), "q8_0", "-t", "2", "--allow-requantize")
    assert r.returncode == 0, r.stderr
    info = run("info", str(out))
    assert info.returncode == 0 and "Q8_0" in info.stdout, info.stdout
    bad = run("quantize", MODEL, str(tmp_path / "x.gguf"), "q9_z")
    assert bad.returncode == 2 and "unknown type 'Q9_Z'" in bad.stderr, bad.stderr


def test_quantize_to_f32_and_copy(tmp_path):
    src = tensor_types(MODEL)
    f32 = tmp_path / "f32.gguf"
    r = run("quantize", MODEL, str(f32), "f32", "-t", "2")  # dequantizing needs no flag
    assert r.returncode == 0, r.stderr
    assert set(tensor_types(f32).values()) == {"F32"}
    # F32 -> Q8_0 needs no flag; COPY keeps every tensor as it is (here: split into parts).
    q8 = tmp_path / "q8.gguf"
    assert run("quantize", str(f32), str(q8), "Q8_0", "-t", "2").returncode == 0
    copy = tmp_path / "copy.gguf"
    r = run("quantize", MODEL, str(copy), "copy", "--split-max-tensors", "100")
    assert r.returncode == 0 and "(COPY)" in r.stderr, r.stderr
    first = tmp_path / "copy-00001-of-00003.gguf"
    assert tensor_types(first) == src
    a = run(MODEL, "Hi", "--temp", "0", "-n", "8", "-t", "2")
    b = run(str(first), "Hi", "--temp", "0", "-n", "8", "-t", "2")
    assert a.returncode == 0 and a.stdout == b.stdout, b.stderr


def test_tokenize_show_pieces():
    ids = run("tokenize", MODEL, "Hello world, naïve\ttab")
    pieces = run("tokenize", MODEL, "Hello world, naïve\ttab", "--show-pieces")
    assert ids.returncode == 0 and pieces.returncode == 0, pieces.stderr
    lines = pieces.stdout.splitlines()
    assert [int(l.split(" -> ")[0]) for l in lines] == [int(x) for x in ids.stdout.split()]
    assert lines[0] == "  9906 -> 'Hello'" or re.fullmatch(r" *\d+ -> 'Hello'", lines[0]), lines
    assert re.fullmatch(r" *\d+ -> ' world'", lines[1]), lines
    text = "".join(re.fullmatch(r" *\d+ -> '(.*)'", l).group(1) for l in lines)
    assert text == "Hello world, naïve\\ttab", text  # the tab shows as \t
    both = run("tokenize", MODEL, "hi", "--show-pieces", "--json")
    assert both.returncode == 2 and "--show-pieces" in both.stderr


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
    assert alone.returncode == 2 and "--json" in alone.stderr
