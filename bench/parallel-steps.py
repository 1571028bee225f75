#!/usr/bin/env python3
"""What a decode step of N tokens costs against a step of one: `minfer bench MODEL -p 0 -n 64
--parallel N -o json` (N sequences decoding together, short context), step_ms for N = 1, 2, 4, 8,
interleaved rounds (one run of each N per round, so all see the same machine load), medians;
each ISA table given (MINFER_ISA) on the same models. The issue's goal: <= 1.25x at every N.

  python3 bench/parallel-steps.py [--build build] [-t 2] [--rounds 3] [--isa native,avx2]
      [--models ~/.cache/minfer/bench/qwen2.5-0.5b-Q4_0.gguf ...] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.expanduser("~/.cache/minfer/bench")


def step_ms(build, model, n_parallel, threads, isa):
    env = dict(os.environ)
    if isa != "native":
        env["MINFER_ISA"] = isa
    out = subprocess.run([os.path.join(build, "bin/minfer"), "bench", model, "-p", "0", "-n", "64", "-r", "1", "-t",
                          str(threads), "--parallel", str(n_parallel), "-o", "json"], capture_output=True, text=True,
                         env=env, check=True)
    text = out.stdout
    return json.loads(text[text.index("["):])[0]["step_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--isa", default="native,avx2", help="tables, comma-separated (native: the CPU's best)")
    ap.add_argument("--models", nargs="*", default=[os.path.join(BENCH, f"qwen2.5-0.5b-{t}.gguf")
                                                     for t in ("Q4_0", "Q4_K_M", "Q8_0")])
    ap.add_argument("--json")
    a = ap.parse_args()
    ns = (1, 2, 4, 8)
    samples = {}
    for _ in range(a.rounds):
        for isa in a.isa.split(","):
            for m in a.models:
                for n in ns:
                    samples.setdefault((isa, m, n), []).append(step_ms(a.build, m, n, a.threads, isa))
    rows = []
    print(f"step of N tokens vs one, {a.threads} threads, medians of {a.rounds} interleaved rounds (step_ms)\n")
    print("| table | model | 1 token ms | 2 | 4 | 8 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for isa in a.isa.split(","):
        for m in a.models:
            med = {n: statistics.median(samples[(isa, m, n)]) for n in ns}
            rows.append({"isa": isa, "model": os.path.basename(m), "step_ms": med})
            cells = " | ".join(f"{med[n]:.2f} ms ({med[n] / med[1]:.2f}x)" for n in ns[1:])
            print(f"| {isa} | {os.path.basename(m)} | {med[1]:.2f} | {cells} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "rows": rows, "samples": {f"{k[0]}|{k[1]}|{k[2]}": v for k, v in samples.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
