#!/usr/bin/env python3
"""Compares minfer with the llama.cpp goldens of goldens.json (made by make_goldens.py) on
SmolLM2-135M-Instruct: chat rendering and tokenization of 5 prompts, 48-token greedy
continuations, and perplexity (-c 512) on Debian's license texts. Prints a report; exits 1 if
any check fails.

  python3 tests/oracle/smollm2/check_smollm2.py --minfer build/bin/minfer \
      --model ~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf [--skip-ppl] [--skip-greedy]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_goldens import corpus_text  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--skip-greedy", action="store_true", help="only the perplexity check")
    ap.add_argument("-t", "--threads", type=int, default=1, help="minfer threads")
    a = ap.parse_args()
    g = json.load(open(os.path.join(HERE, "goldens.json"), encoding="utf-8"))
    ok = True
    for c in ([] if a.skip_greedy else g["cases"]):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"messages": [{"role": "user", "content": c["prompt"]}], "add_generation_prompt": True}, f)
        r = subprocess.run([a.minfer, "chat-template", a.model, "--input", f.name], capture_output=True, text=True)
        os.remove(f.name)
        render_ok = r.returncode == 0 and r.stdout == c["text"]
        ids = json.loads(subprocess.run([a.minfer, "tokenize", a.model, c["text"], "--json"],
                                        capture_output=True, text=True, check=True).stdout)
        out = subprocess.run([a.minfer, "logits", a.model, "--tokens", ",".join(map(str, c["tokens"])),
                              "--greedy", str(g["n_greedy"]), "-t", str(a.threads)], capture_output=True, text=True, check=True)
        greedy = json.loads(out.stdout.strip().splitlines()[-1])["greedy"]
        same = next((i for i, (x, y) in enumerate(zip(greedy, c["greedy"])) if x != y), len(greedy))
        case_ok = render_ok and ids == c["tokens"] and greedy == c["greedy"]
        ok &= case_ok
        print(f"{c['prompt'][:40]:42} render {'ok' if render_ok else 'DIFF'}  tokens "
              f"{'ok' if ids == c['tokens'] else 'DIFF'}  greedy identical for {same}/{len(c['greedy'])} steps")
    if not a.skip_ppl:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write(corpus_text())
        out = subprocess.run([a.minfer, "perplexity", a.model, "-f", f.name, "-c", str(g["perplexity"]["n_ctx"]),
                              "--json"], capture_output=True, text=True, check=True)
        os.remove(f.name)
        ours = json.loads(out.stdout.strip().splitlines()[-1])
        ref = g["perplexity"]
        rel = abs(ours["ppl"] - ref["ppl"]) / ref["ppl"]
        ppl_ok = rel <= 0.005 and ours["n_scored"] == ref["n_scored"]
        ok &= ppl_ok
        print(f"perplexity: minfer {ours['ppl']:.4f} +/- {ours['ppl_err']:.4f}, llama.cpp {ref['ppl']:.4f} "
              f"+/- {ref['ppl_err']:.4f}, {ours['n_scored']} tokens scored, difference {100 * rel:.3f}% "
              f"({'ok' if ppl_ok else 'FAIL'}: limit 0.5%)")
    print("all checks passed" if ok else "some checks FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
