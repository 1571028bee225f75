#!/usr/bin/env python3
"""Op-by-op comparison of one decode call of minfer (`minfer logits --dump-tensors DIR --no-fuse`)
and llama.cpp (`llama-oracle dump ... --out DIR`) on a llama-architecture model: for each
named tensor, how many elements are bit-identical, the largest absolute difference and the
NMSE. The first op of layer 0 that is not bit-identical is where the engines' arithmetic parts.

  python3 tests/oracle/llama/compare_dumps.py /tmp/minfer-dump/0 /tmp/llama-dump/0 [--layers 0,1,29]
"""
import argparse
import json
import os

import numpy as np

PAIRS = [  # (minfer name, llama.cpp name); {i} = layer
    ("blk.{i}.attn_norm", "attn_norm-{i}"),
    ("blk.{i}.attn_q.rope", "Qcur-{i}"),
    ("blk.{i}.attn_k.rope", "Kcur-{i}"),
    ("blk.{i}.attn_v", "Vcur-{i}"),
    ("blk.{i}.attn", "kqv_out-{i}"),
    ("blk.{i}.attn_output", "attn_out-{i}"),
    ("blk.{i}.ffn_inp", "ffn_inp-{i}"),
    ("blk.{i}.ffn_norm", "ffn_norm-{i}"),
    ("blk.{i}.ffn_gate", "ffn_gate-{i}"),
    ("blk.{i}.ffn_up", "ffn_up-{i}"),
    ("blk.{i}.ffn_swiglu", "ffn_swiglu-{i}"),
    ("blk.{i}.ffn_down", "ffn_out-{i}"),
    ("blk.{i}.l_out", "l_out-{i}"),
]


def load(d, name):
    p = os.path.join(d, name + ".f32")
    return np.fromfile(p, dtype=np.float32) if os.path.exists(p) else None


def report(label, a, b):
    if a is None or b is None:
        print(f"{label:40} missing ({'minfer' if a is None else 'llama.cpp'})")
        return
    if a.size != b.size:  # the last layer keeps only the output rows in one engine
        n = min(a.size, b.size)
        a, b = a[-n:], b[-n:]
    same = int(np.sum(a.view(np.uint32) == b.view(np.uint32)))
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    nmse = float(np.sum(diff ** 2) / max(np.sum(b.astype(np.float64) ** 2), 1e-30))
    print(f"{label:40} identical {same:7}/{a.size:<7} max|d| {diff.max():.3e}  nmse {nmse:.3e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("minfer_dir")
    ap.add_argument("llama_dir")
    ap.add_argument("--layers", default="0,1")
    a = ap.parse_args()
    report("inp_embd / embd", load(a.minfer_dir, "inp_embd"), load(a.llama_dir, "embd"))
    for i in [int(x) for x in a.layers.split(",")]:
        for ours, theirs in PAIRS:
            report(f"{ours.format(i=i)}", load(a.minfer_dir, ours.format(i=i)), load(a.llama_dir, theirs.format(i=i)))
    report("output_norm / result_norm", load(a.minfer_dir, "output_norm"), load(a.llama_dir, "result_norm"))
    idx = json.load(open(os.path.join(a.minfer_dir, "index.json")))
    logits = [k for k in idx if idx[k]["op"] == "matmul" and k.startswith("result") or k == "logits"]
    if logits:
        report("logits / result_output", load(a.minfer_dir, logits[0]), load(a.llama_dir, "result_output"))


if __name__ == "__main__":
    main()
