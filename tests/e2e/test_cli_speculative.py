"""`minfer MODEL PROMPT` and `--cnv` with speculative decoding: the same text as without, the
`[spec] drafted N, accepted M (P%)` line, and flags that cannot work refused by name."""
import os
import re
import subprocess

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
SPEC_LINE = re.compile(r"^\[spec\] drafted (\d+), accepted (\d+) \((\d+\.\d)%\)", re.M)


def run(*args, stdin=None):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, input=stdin, timeout=300)


PROMPT = "Copy this text exactly: the quick brown fox jumps over the lazy dog, and the lazy dog sleeps."


def test_one_shot_same_text_and_spec_line():
    for sampling in (["--greedy", "--repeat-penalty", "1"], ["--temp", "0.8", "--seed", "7"]):
        plain = run(MODEL, PROMPT, "-n", "48", "-t", "2", *sampling)
        assert plain.returncode == 0, plain.stderr
        assert "[spec]" not in plain.stderr
        for spec in (["--spec-ngram"], ["--spec-draft", MODEL], ["--spec-draft", MODEL, "--spec-ngram",
                                                                "--spec-draft-adaptive", "--spec-draft-n", "8"],
                     ["--spec-ngram", "--spec-draft-fixed"]):
            r = run(MODEL, PROMPT, "-n", "48", "-t", "2", *sampling, *spec)
            assert r.returncode == 0, r.stderr
            assert r.stdout == plain.stdout, (sampling, spec)
            m = SPEC_LINE.search(r.stderr)
            assert m, r.stderr
            drafted, accepted, pct = int(m.group(1)), int(m.group(2)), float(m.group(3))
            assert accepted <= drafted
            assert abs(pct - (100.0 * accepted / drafted if drafted else 0.0)) < 0.06
            if spec == ["--spec-draft", MODEL] and sampling[0] == "--greedy":
                assert drafted > 0 and accepted == drafted, r.stderr  # a model drafting for itself


def test_refusals_name_the_flag():
    r = run(MODEL, "hi", "-n", "4", "--spec-ngram", "--spec-draft-n", "100")
    assert r.returncode != 0 and "--spec-draft-n 100" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--spec-draft-adaptive")
    assert r.returncode != 0 and "--spec-draft-adaptive needs" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--spec-draft-fixed")
    assert r.returncode != 0 and "--spec-draft-fixed needs" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--spec-ngram", "--spec-draft-fixed", "--spec-draft-adaptive")
    assert r.returncode != 0 and "give one" in r.stderr, r.stderr
    r = run(MODEL, "hi", "-n", "4", "--spec-draft", "/nonexistent/draft.gguf")
    assert r.returncode != 0 and "draft" in r.stderr, r.stderr


def test_cnv_with_regen_matches_plain():
    script = "Name three fruits.\n/regen\nNow three vegetables.\n/stats\n"
    args = ["--cnv", MODEL, "-n", "40", "-t", "2", "--temp", "0.7", "--seed", "3"]
    plain = run(*args, stdin=script)
    spec = run(*args, "--spec-draft", MODEL, "--spec-ngram", stdin=script)
    assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
    assert spec.stdout == plain.stdout
    assert len(SPEC_LINE.findall(spec.stderr)) == 3, spec.stderr  # one per reply
    assert "[stats] speculative: drafted" in spec.stderr
