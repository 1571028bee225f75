#!/usr/bin/env python3
"""minfer's top-n-sigma and dynamic temperature against llama.cpp's (llama-oracle sampler-lines)
on random logit rows: the same survivors (a token may differ only where its logit lies within
float rounding of the cut: llama.cpp sums in float, minfer in double) and the same dynamic
temperature within 1e-4 relative. One documented difference: with masked (-inf) tokens in the
row, llama.cpp's maximum entropy ln n counts them and minfer's counts the survivors only; such
cases must match the formula with each engine's n. Exits 1 on any other difference.

  python3 tests/oracle/sampling/check_samplers.py --oracle build/tests/llama-oracle \
      --minfer-tool build/tests/oracle/sampling/sampler-lines [--cases 400]
"""
import argparse
import json
import math
import random
import subprocess
import sys


def run(cmd, lines):
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr}")
    return [json.loads(x) for x in r.stdout.splitlines()]


def dyn(logits, params, n):
    """The dynamic temperature of sampling.md over the finite logits, with ln n as the maximum entropy."""
    temp, rng_, exp_ = params
    fin = [x for x in logits if math.isfinite(x)]
    m = max(fin)
    w = [math.exp(x - m) for x in fin]
    tot = sum(w)
    h = -sum(v / tot * math.log(v / tot) for v in w if v > 0)
    lo, hi = max(0.0, temp - rng_), temp + rng_
    return lo + (hi - lo) * (h / math.log(n)) ** exp_


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--minfer-tool", required=True)
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    cases = []
    for i in range(a.cases):
        n = rng.choice([2, 3, 5, 17, 64, 300, 2000])
        scale = rng.choice([0.1, 1.0, 4.0, 20.0])
        logits = [rng.gauss(0, scale) for _ in range(n)]
        if n > 3 and rng.random() < 0.3:  # some tokens already masked
            for j in rng.sample(range(n), n // 4):
                logits[j] = -math.inf
        if i % 2 == 0:
            params = [rng.choice([0.5, 1.0, 1.5, 2.0, 3.0, -1.0])]
            kind = "sigma"
        else:
            params = [rng.choice([0.3, 0.8, 1.0, 1.5]), rng.choice([0.1, 0.5, 1.0]), rng.choice([0.0, 0.5, 1.0, 2.0])]
            kind = "dynatemp"
        cases.append((kind, params, [float(f"{x:.6g}") if math.isfinite(x) else x for x in logits]))
    lines = [" ".join([k] + [repr(p) for p in ps] + ["-inf" if not math.isfinite(x) else repr(x) for x in ls])
             for k, ps, ls in cases]
    want = run([a.oracle, "sampler-lines"], lines)
    got = run([a.minfer_tool], lines)
    assert len(want) == len(got) == len(cases), (len(want), len(got))
    bad = same = near = masked = 0
    for (kind, ps, ls), w, g in zip(cases, want, got):
        if kind == "sigma":
            if w["kept"] == g["kept"]:
                same += 1
                continue
            fin = [x for x in ls if math.isfinite(x)]
            mean = sum(fin) / len(fin)
            cut = max(fin) - ps[0] * math.sqrt(sum((x - mean) ** 2 for x in fin) / len(fin))
            diff = set(w["kept"]) ^ set(g["kept"])
            if all(abs(ls[i] - cut) <= 1e-5 * max(1.0, abs(cut)) for i in diff):
                near += 1
            else:
                bad += 1
                print(f"top-n-sigma {ps[0]} on {len(ls)} logits: llama.cpp kept {len(w['kept'])}, minfer {len(g['kept'])}; "
                      f"differing ids {sorted(diff)[:10]}")
        else:
            fin = [(x, y) for x, y in zip(ls, w["logits"]) if math.isfinite(x) and y is not None and x != 0.0]
            n_fin = len([x for x in ls if math.isfinite(x)])
            overflow = any(math.isfinite(x) and x != 0.0 and y is None for x, y in zip(ls, w["logits"]))
            if overflow:  # llama.cpp divided by a temperature so small that the logits overflowed
                t = 0.0   # minfer takes the top token below 1e-6 (sampling.md)
                if g["temp"] < 1e-6:
                    same += 1
                    continue
            elif n_fin <= 1 or not fin:
                t = ps[0]  # nothing to measure: the plain temperature
            else:
                x, y = max(fin, key=lambda p: abs(p[0]))
                t = x / y if y != 0 else math.inf
            if abs(g["temp"] - t) <= 1e-4 * max(1.0, abs(t)):
                same += 1
            elif n_fin < len(ls) and all(abs(v - dyn(ls, ps, n)) <= 1e-4 * max(1.0, abs(v))
                                         for v, n in ((g["temp"], n_fin), (t, len(ls)))):
                masked += 1  # the documented difference: llama.cpp's n counts the masked tokens
            else:
                bad += 1
                print(f"dynatemp {ps} on {len(ls)} logits: llama.cpp T {t:.6g}, minfer {g['temp']:.6g}")
    print(f"samplers vs llama.cpp: {same} identical, {near} differing only at the cut's rounding, {masked} dynamic "
          f"temperatures differing only by llama.cpp counting masked tokens in ln n, {bad} different (of {len(cases)})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
