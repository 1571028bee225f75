"""minfer's GBNF engine against llama.cpp's own grammar tests and grammars (from the llama.cpp
source tree of node-llama-cpp, at test time):
  - every accept/reject case of tests/test-grammar-integration.cpp's test_grammar() calls,
    through `minfer grammar FILE --texts-json T --json`;
  - every grammar of grammars/ parses (token references, a newer llama.cpp syntax, excepted
    by name), and json.gbnf matches random JSON documents written in its dialect and refuses
    their truncations.
"""
import json
import os
import random
import subprocess
import tempfile

import pytest

from extract_grammar_cases import extract

MINFER = os.environ.get("MINFER_BIN", "")
LLAMA = os.environ.get("MINFER_LLAMA_SRC", "")


def run_grammar(grammar_text, texts):
    with tempfile.TemporaryDirectory() as d:
        g, t = os.path.join(d, "g.gbnf"), os.path.join(d, "t.json")
        with open(g, "w", encoding="utf-8") as f:
            f.write(grammar_text)
        with open(t, "w", encoding="utf-8") as f:
            json.dump(texts, f, ensure_ascii=False)
        p = subprocess.run([MINFER, "grammar", g, "--texts-json", t, "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def integration_cases():
    path = os.path.join(LLAMA, "tests", "test-grammar-integration.cpp")
    assert os.path.isfile(path), f"{path} missing (MINFER_LLAMA_SRC)"
    with open(path, encoding="utf-8") as f:
        cases, skipped = extract(f.read())
    return cases, skipped


def test_integration_cases():
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r}"
    cases, skipped = integration_cases()
    assert len(cases) >= 10, "too few test_grammar cases extracted"
    # The ones left out use llama.cpp's token syntax (<[id]>, built from token ids): say so.
    for s in skipped:
        assert "token(" in s["why"], s
    n = 0
    for c in cases:
        got = run_grammar(c["grammar"], c["passing"] + c["failing"])
        for text, v in zip(c["passing"], got):
            assert v == "match", f"{c['desc']}: {text!r} should match, got {v}"
        for text, v in zip(c["failing"], got[len(c["passing"]):]):
            assert v != "match", f"{c['desc']}: {text!r} should not match"
        n += len(got)
    print(f"\n[grammar oracle] {len(cases)} llama.cpp grammars, {n} strings agree; {len(skipped)} token-syntax cases not run")


def test_llama_grammars_parse():
    d = os.path.join(LLAMA, "grammars")
    names = sorted(f for f in os.listdir(d) if f.endswith(".gbnf"))
    assert len(names) >= 5
    for name in names:
        text = open(os.path.join(d, name), encoding="utf-8").read()
        with tempfile.NamedTemporaryFile("w", suffix=".gbnf", delete=False, encoding="utf-8") as f:
            f.write(text)
        try:
            p = subprocess.run([MINFER, "grammar", f.name], capture_output=True, text=True, timeout=60)
        finally:
            os.unlink(f.name)
        if "<" in text.replace("\\<", "") and p.returncode != 0:
            assert "token references" in p.stderr, (name, p.stderr)
            continue
        assert p.returncode == 0 and p.stdout.startswith("grammar ok"), (name, p.stderr)


def random_json(rng, depth=0):
    """A JSON text in json.gbnf's dialect (no exponents, <= 16 integer digits)."""
    k = rng.randrange(7 if depth < 3 else 4)
    if k == 0:
        return rng.choice(["true", "false", "null"])
    if k == 1:
        s = str(rng.randrange(-10**6, 10**6))
        return s + (f".{rng.randrange(1000)}" if rng.random() < 0.4 else "")
    if k in (2, 3):
        chars = []
        for _ in range(rng.randrange(6)):
            r = rng.random()
            if r < 0.15:
                chars.append(rng.choice(['\\"', "\\\\", "\\n", "\\t", "\\u00e9"]))
            elif r < 0.3:
                chars.append(rng.choice("éß中文😀"))
            else:
                chars.append(chr(rng.randrange(0x20, 0x7F)).replace('"', "'").replace("\\", "/"))
        return '"' + "".join(chars) + '"'
    sep = rng.choice([",", ", ", ",\n  "])
    if k == 4:
        return "[" + sep.join(random_json(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    items = [f'"k{i}"' + rng.choice([":", ": "]) + random_json(rng, depth + 1) for i in range(rng.randrange(4))]
    return "{" + sep.join(items) + "}"


def test_json_gbnf_random_documents():
    text = open(os.path.join(LLAMA, "grammars", "json.gbnf"), encoding="utf-8").read()
    rng = random.Random(7)
    docs = []
    while len(docs) < 200:
        d = random_json(rng)
        if d.startswith("{"):
            json.loads(d)  # the generator writes valid JSON
            docs.append(d)
    truncated = [d[: rng.randrange(1, len(d))] for d in docs if len(d) > 2]
    got = run_grammar(text, docs + truncated)
    assert got[: len(docs)] == ["match"] * len(docs), [d for d, v in zip(docs, got) if v != "match"][:3]
    # A proper prefix of an object is never a whole one (the root is one object).
    assert all(v != "match" for v in got[len(docs):])
    assert all(v == "incomplete" for v in got[len(docs):]), "prefixes of matches are incomplete, not refused"
