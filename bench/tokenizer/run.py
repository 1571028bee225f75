#!/usr/bin/env python3
"""Tokenizer throughput, minfer vs llama.cpp, on the same ~1 MB mixed text.

    python3 bench/tokenizer/run.py [--build build] [--rounds 5] [--repeats 3] [--mb 1]

The text is deterministic (tests/oracle/tokenizer/strings.py: prose in many scripts, code,
numbers, emoji, whitespace). Each round runs `tokenizer-bench` (ours) and `llama-oracle
tokenize-bench` (llama.cpp's llama_tokenize through its public API), alternating which goes
first; each times only the tokenize call, special-token parsing on, no BOS. Reports the median
over all repeats, MB/s, tokens, and the ratio (ours / llama.cpp throughput; > 1 is faster).
Both must produce the same number of tokens.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle", "tokenizer"))
from strings import mixed_text  # noqa: E402


def models():
    cache = os.environ.get("MINFER_MODEL_DIR") or os.path.expanduser("~/.cache/minfer/models")
    return [("qwen2", os.path.join(ROOT, ".deps/llama.cpp/models/ggml-vocab-qwen2.gguf")),
            ("smollm2", os.path.join(cache, "SmolLM2-135M-Instruct-Q4_1.gguf"))]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="minfer build directory")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="timed encodes per process")
    ap.add_argument("--mb", type=float, default=1.0, help="size of the text in MiB")
    args = ap.parse_args()
    ours_bin = os.path.join(args.build, "bin", "tokenizer-bench")
    llama_bin = os.path.join(args.build, "tests", "llama-oracle")
    for b in (ours_bin, llama_bin):
        if not os.path.exists(b):
            sys.exit(f"{b} is not built (ninja -C {args.build} tokenizer-bench llama-oracle)")

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(mixed_text(int(args.mb * (1 << 20))))
        path = f.name
    n_bytes = os.path.getsize(path)
    print(f"text: {n_bytes} bytes, {args.rounds} rounds x {args.repeats} repeats, medians\n")
    print(f"{'vocab':8} {'tokens':>8} {'minfer MB/s':>12} {'llama.cpp MB/s':>15} {'ratio':>7}")
    ok = True
    try:
        for name, model in models():
            if not os.path.exists(model):
                sys.exit(f"{model} is missing (run scripts/setup.sh)")
            ours, theirs, counts = [], [], set()
            for r in range(args.rounds):
                cmds = [(ours, [ours_bin, model, path, "-n", str(args.repeats)]),
                        (theirs, [llama_bin, "tokenize-bench", model, path, "--special", "-n", str(args.repeats)])]
                for times, cmd in (cmds if r % 2 == 0 else cmds[::-1]):
                    res = run(cmd)
                    times += res["seconds"]
                    counts.add(res["n_tokens"])
            t_ours, t_llama = statistics.median(ours), statistics.median(theirs)
            mbs_ours, mbs_llama = n_bytes / t_ours / 1e6, n_bytes / t_llama / 1e6
            print(f"{name:8} {min(counts):>8} {mbs_ours:>12.1f} {mbs_llama:>15.2f} {t_llama / t_ours:>7.2f}")
            if len(counts) != 1:
                print(f"  token counts differ: {sorted(counts)}")
                ok = False
    finally:
        os.unlink(path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
