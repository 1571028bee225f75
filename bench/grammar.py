#!/usr/bin/env python3
"""Grammar-constrained decoding speed on SmolLM2-135M (49152 tokens): decode tokens/s with and
without a grammar, minfer and llama.cpp (llama-oracle over the prebuilt libllama: its grammar
sampler in the sampler chain) side by side, interleaved repetitions, medians.

Rows: llama.cpp's json.gbnf and a grammar minfer makes from a JSON Schema (the same GBNF text
goes to both engines), greedy and sampled (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8).
Constrained runs end when the grammar completes (at most -n tokens); each is set against an
unconstrained run of the same engine and the same number of tokens (end-of-generation ignored). minfer checks the sampler's choice first and masks only when it is
refused (masks cached per grammar state).

  python3 bench/grammar.py [--build build] [-t 2] [--reps 3] [-n 128] [--json out.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOL = os.path.join(os.path.expanduser("~/.cache/minfer/models"), "SmolLM2-135M-Instruct-Q4_1.gguf")
GEN_RE = re.compile(r"\[generate\] (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\)")
PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "email": {"type": "string", "pattern": "^[a-z]{1,12}@[a-z]{1,12}\\.com$"},
                         "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 4}},
          "required": ["name", "age", "email", "hobbies"], "additionalProperties": False}
PROMPT = "Describe a person as a JSON object: name, age, email and hobbies."


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)


def minfer_tps(a, grammar, sampling, prompt_ids_file, n=None):
    cmd = [a.minfer, SMOL, PROMPT, "-n", str(n or a.n), "-t", str(a.threads), "--repeat-penalty", "1", "--ids-out", prompt_ids_file]
    cmd += ["--greedy"] if sampling is None else ["--temp", "0.8", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05", "--seed", str(sampling)]
    cmd += ["--grammar-file", grammar] if grammar else ["--ignore-eos"]
    m = GEN_RE.search(sh(cmd).stderr)
    return int(m.group(1)), float(m.group(3))


def llama_tps(a, grammar, sampling, prompt_ids, n=None):
    cmd = [a.oracle, "greedy", SMOL, "--tokens", ",".join(map(str, prompt_ids)), "-n", str(n or a.n), "-t", str(a.threads)]
    cmd += ["--timed"] if sampling is None else ["--temp", "0.8", "--seed", str(sampling)]
    if grammar:
        cmd += ["--grammar-file", grammar]
    out = json.loads(sh(cmd).stdout)
    return len(out["greedy"]), len(out["greedy"]) / out["gen_seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--json")
    a = ap.parse_args()
    a.minfer = os.path.join(a.build, "bin", "minfer")
    a.oracle = os.path.join(a.build, "tests", "llama-oracle")
    with tempfile.TemporaryDirectory() as d:
        schema = os.path.join(d, "person.json")
        with open(schema, "w") as f:
            json.dump(PERSON, f)
        person = os.path.join(d, "person.gbnf")
        with open(person, "w") as f:
            f.write(sh([a.minfer, "grammar", "--json-schema", schema, "--print"]).stdout)
        ids_file = os.path.join(d, "ids.json")
        grammars = {"json.gbnf": os.path.join(ROOT, ".deps", "llama.cpp", "grammars", "json.gbnf"), "schema person": person}
        rows = []
        for sampling in (None, 1):
            samples = {}
            for _ in range(a.reps):  # interleaved: each repetition runs every configuration once
                for gname, g in grammars.items():
                    n_m, tps_m = minfer_tps(a, g, sampling, ids_file)
                    with open(ids_file) as f:
                        prompt_ids = json.load(f)["prompt"]
                    _, free_m = minfer_tps(a, None, sampling, ids_file, n_m)  # as many tokens, no grammar
                    n_l, tps_l = llama_tps(a, g, sampling, prompt_ids)
                    _, free_l = llama_tps(a, None, sampling, prompt_ids, n_l)
                    samples.setdefault(gname, []).append((n_m, tps_m, free_m, n_l, tps_l, free_l))
            for gname, v in samples.items():
                med = [statistics.median(x[i] for x in v) for i in range(6)]
                rows.append({"grammar": gname, "sampling": "greedy" if sampling is None else "sampled t=0.8",
                             "minfer_tokens": v[0][0], "minfer": med[1], "minfer_free": med[2],
                             "llama_tokens": v[0][3], "llama": med[4], "llama_free": med[5]})
    print("| grammar | sampling | minfer free tok/s | minfer constrained tok/s (vs free, tokens) | llama.cpp free | llama.cpp constrained (vs free, tokens) | minfer / llama.cpp constrained |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['grammar']} | {r['sampling']} | {r['minfer_free']:.1f} | {r['minfer']:.1f} ({r['minfer'] / r['minfer_free']:.0%}, {r['minfer_tokens']} tok) | "
              f"{r['llama_free']:.1f} | {r['llama']:.1f} ({r['llama'] / r['llama_free']:.0%}, {r['llama_tokens']} tok) | {r['minfer'] / r['llama']:.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
