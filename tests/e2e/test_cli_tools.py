"""End-to-end tests of the tool commands' argument handling (`tokenize`, `quantize`) on SmolLM2."""
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
