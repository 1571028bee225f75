"""Grammar-constrained greedy decoding on SmolLM2: minfer's output equals llama.cpp's (its
grammar sampler, then greedy, through llama-oracle over the prebuilt libllama) for the same
GBNF, prompt tokens and model: llama.cpp's own grammars (json, list, arithmetic, chess, english),
small hand-written ones, and grammars minfer makes from JSON Schemas (fed to both engines).
Token ids are compared (minfer's from --ids-out; the same prompt ids go to llama.cpp). Where they
part, the test requires a near-tie, as tests/oracle/inference does for plain greedy: at the
first differing step both engines' logits are taken, each engine's token must be the better of the two under its
own logits (so neither mask refused the other's token: the grammars agree there), and llama.cpp's
margin between them within twice the largest logit difference between the engines (the float
noise that can flip a choice). Partings are counted and printed.
"""
import json
import os
import subprocess
import tempfile

import numpy as np

from schemas import SCHEMAS

MINFER = os.environ.get("MINFER_BIN", "")
ORACLE = os.environ.get("MINFER_LLAMA_ORACLE", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
LLAMA = os.environ.get("MINFER_LLAMA_SRC", "")
N = 96
EOG = set()

CASES = [
    ("json.gbnf", "Describe a cat as a JSON object with fields name, age and color."),
    ("json_arr.gbnf", "List three fruits as a JSON array."),
    ("list.gbnf", "Give me a shopping list."),
    ("arithmetic.gbnf", "Write an arithmetic expression."),
    ("chess.gbnf", "Write the first moves of a chess game."),
    ("english.gbnf", "Tell me about the sea."),
    ('root ::= ("yes" | "no") "."', "Is the sky blue?"),
    ('root ::= "The answer is " [0-9]+ "."', "What is 12 + 30?"),
    ('root ::= [A-Z] [a-z]+ (" " [a-z]+){2,4} "."', "Describe the weather in one sentence."),
]


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    assert p.returncode == 0, f"{args[:3]}: {p.stderr[-2000:]}"
    return p.stdout


def logits(exe, ids, out, *flags):
    run([exe, "logits", MODEL, "--tokens", ",".join(map(str, ids)), "--out", out, "-t", "2", *flags])
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)[-1]


def compare(gbnf_path, prompt, d):
    """(prompt ids, llama.cpp's ids, minfer's ids), end-of-generation tokens left out of both."""
    ids_file = os.path.join(d, "ids.json")
    run([MINFER, MODEL, prompt, "--greedy", "--repeat-penalty", "1", "-n", str(N), "-t", "2",
         "--grammar-file", gbnf_path, "--ids-out", ids_file])
    with open(ids_file) as f:
        got = json.load(f)
    theirs = json.loads(run([ORACLE, "greedy", MODEL, "--tokens", ",".join(map(str, got["prompt"])), "-n", str(N),
                             "--grammar-file", gbnf_path, "-t", "2"]))["greedy"]
    return got["prompt"], [t for t in theirs if t not in EOG], got["generated"]


def parting(prompt_ids, theirs, ours, d):
    """At the first differing step: llama.cpp's margin between its token and minfer's, and twice
    the largest logit difference between the engines there."""
    k = next(i for i, (a, b) in enumerate(zip(theirs + [-1], ours + [-1])) if a != b)
    prefix = prompt_ids + theirs[:k]
    m, o = logits(MINFER, prefix, os.path.join(d, "m.f32")), logits(ORACLE, prefix, os.path.join(d, "o.f32"))
    eog = sorted(EOG)
    t = theirs[k] if k < len(theirs) else max(eog, key=lambda i: o[i])
    mine = ours[k] if k < len(ours) else max(eog, key=lambda i: m[i])
    # Each engine took its own best allowed token: minfer's logits do not prefer llama.cpp's token
    # (else minfer's mask refused it) and llama.cpp's do not prefer minfer's (else its mask did).
    # The logits here come from one batch over the prefix, generation took them one token at a time:
    # allow twice the difference between minfer's batched and one-token-per-pass logits.
    seq = logits(MINFER, prefix, os.path.join(d, "s.f32"), "-b", "1")
    path = 2 * float(np.abs(m - seq).max())
    assert m[mine] >= m[t] - path, f"step {k}: minfer took {mine} over {t} although its logits prefer {t} by {m[t] - m[mine]:.3f} (path noise {path:.3f}): the masks differ"
    assert o[t] >= o[mine] - path, f"step {k}: llama.cpp took {t} over {mine} although its logits prefer {mine} by {o[mine] - o[t]:.3f}: the masks differ"
    return k, abs(float(o[t] - o[mine])), 2 * float(np.abs(m - o).max())


def test_constrained_greedy_equals_llama_cpp():
    for p in (MINFER, ORACLE, MODEL):
        assert os.path.isfile(p), p
    EOG.update(json.loads(run([ORACLE, "vocab-info", MODEL]))["eog"])
    n = tokens = 0
    with tempfile.TemporaryDirectory() as d:
        cases = []
        for g, prompt in CASES:
            if g.endswith(".gbnf"):
                cases.append((g, os.path.join(LLAMA, "grammars", g), prompt))
            else:
                path = os.path.join(d, f"g{len(cases)}.gbnf")
                with open(path, "w") as f:
                    f.write(g + "\n")
                cases.append((g, path, prompt))
        for name, prompt, schema in SCHEMAS[:8]:
            s, path = os.path.join(d, name + ".json"), os.path.join(d, name + ".gbnf")
            with open(s, "w") as f:
                json.dump(schema, f)
            with open(path, "w") as f:
                f.write(run([MINFER, "grammar", "--json-schema", s, "--print"]))
            cases.append(("schema " + name, path, prompt))
        parted = []
        for name, path, prompt in cases:
            ids, theirs, ours = compare(path, prompt, d)
            n += 1
            tokens += len(theirs)
            if ours == theirs:
                continue
            k, margin, noise = parting(ids, theirs, ours, d)
            assert margin <= noise, f"{name}: parts at step {k}, not a near-tie ({margin:.3f} > {noise:.3f})\n llama.cpp {theirs}\n minfer    {ours}"
            parted.append(f"{name} at step {k} (margin {margin:.3f} <= {noise:.3f})")
    print(f"\n[grammar greedy] {n} grammars, {tokens} llama.cpp tokens: {n - len(parted)} outputs identical to llama.cpp's; "
          f"parted at near-ties: {parted}")
