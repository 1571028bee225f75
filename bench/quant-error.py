#!/usr/bin/env python3
"""Tensor-level error of minfer's reference quantizers against llama.cpp's (ggml's) own.

For each type and data distribution, quantizes the same rows with minfer (through
bench/quant-row-tool) and with ggml (ggml_quantize_chunk from the prebuilt libggml-base.so,
no importance matrix), decodes both with gguf-py's dequantize, and prints
NMSE = sum((deq - x)^2) / sum(x^2) for each and their ratio (ours / ggml, lower is better),
plus the quantization speed of each (ns per element, one thread).

  python3 bench/quant-error.py --tool build/bin/quant-row-tool
  python3 bench/quant-error.py --tool ... --types Q4_K,IQ4_XS --elems 262144

Distributions: gaussian; gaussian with 0.5% outliers at 8-20 sigma; uniform; real weights of
SmolLM2-135M-Instruct (its Q4_1 layer tensors and its Q8_0 token embeddings, dequantized by
gguf-py). Rows of 896 (types with 32-element blocks only), 1024 and 4096 elements.
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIB = ROOT / ".deps/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
DEFAULT_MODEL = Path.home() / ".cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf"
TYPES = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]
ROW_LENS = [896, 1024, 4096]


class Ggml:
    """ggml_quantize_chunk from the prebuilt llama.cpp library (imatrix NULL)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))
        f = self.lib.ggml_quantize_chunk
        f.restype = ctypes.c_size_t
        f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                      ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        self.fn = f

    def quantize(self, qtype, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.zeros(x.size * 2 + 1024, np.uint8)
        nbytes = self.fn(int(qtype), x.ctypes.data, out.ctypes.data, 0, x.shape[0], x.shape[1], None)
        return out[:nbytes].copy()


def minfer_quantize(tool, qtype_name, x, tmp):
    """Runs quant-row-tool; returns (bytes, ns per element it reports)."""
    src, dst = Path(tmp) / "in.f32", Path(tmp) / "out.bin"
    np.ascontiguousarray(x, dtype=np.float32).tofile(src)
    r = subprocess.run([str(tool), "quant", qtype_name, str(src), str(dst), str(x.shape[1])],
                       capture_output=True, text=True, check=True)
    m = re.search(r"ns_per_elem=([0-9.]+)", r.stderr)
    return np.fromfile(dst, dtype=np.uint8), float(m.group(1)) if m else float("nan")


def nmse(x, y):
    return float(((y.astype(np.float64) - x) ** 2).sum() / (x.astype(np.float64) ** 2).sum())


def smollm2_weights(model, n, kind, rng):
    """n values from SmolLM2's Q4_1 layer tensors ('layers') or Q8_0 embeddings ('embd')."""
    reader = GGUFReader(model)
    if kind == "embd":
        t = next(t for t in reader.tensors if t.name == "token_embd.weight")
        rows = dequantize(t.data, t.tensor_type).reshape(-1)
        start = int(rng.integers(0, rows.size - n)) // 4096 * 4096
        return rows[start:start + n].astype(np.float32)
    parts, have = [], 0
    for t in reader.tensors:
        if t.tensor_type != GGMLQuantizationType.Q4_1 or have >= n:
            continue
        v = dequantize(t.data, t.tensor_type).reshape(-1)[: n // 8]
        parts.append(v)
        have += v.size
    return np.concatenate(parts)[:n].astype(np.float32)


def distributions(n, model, seed):
    rng = np.random.default_rng(seed)
    d = {"gaussian": rng.standard_normal(n).astype(np.float32)}
    g = rng.standard_normal(n).astype(np.float32)
    idx = rng.choice(n, n // 200, replace=False)
    g[idx] = (rng.choice([-1.0, 1.0], idx.size) * rng.uniform(8.0, 20.0, idx.size)).astype(np.float32)
    d["outliers"] = g
    d["uniform"] = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    if model and Path(model).exists():
        d["smollm2-q4_1"] = smollm2_weights(model, n, "layers", rng)
        d["smollm2-embd"] = smollm2_weights(model, n, "embd", rng)
    else:
        print(f"note: model {model} not found, skipping real weights", file=sys.stderr)
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", default=str(ROOT / "build/bin/quant-row-tool"))
    ap.add_argument("--lib", default=os.environ.get("MINFER_GGML_BASE_LIB", str(DEFAULT_LIB)))
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--elems", type=int, default=1 << 20, help="elements per distribution")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    ggml = Ggml(args.lib)
    lcm = 28672  # every row length divides it
    n = max(1, args.elems // lcm) * lcm
    dists = distributions(n, args.model, args.seed)
    print(f"{'type':7} {'distribution':13} {'minfer':>10} {'ggml':>10} {'ratio':>6}  "
          f"{'ns/el minfer':>12} {'ggml':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.types.split(","):
            qt = GGMLQuantizationType[name]
            block = 32 if name == "IQ4_NL" else 256
            for dname, x in dists.items():
                se = [0.0, 0.0]
                sx = 0.0
                ns = [0.0, 0.0]
                for row_len in [r for r in ROW_LENS if r % block == 0]:
                    rows = x.reshape(-1, row_len)
                    ours, ns_ours = minfer_quantize(args.tool, name, rows, tmp)
                    t0 = time.perf_counter()
                    theirs = ggml.quantize(qt, rows)
                    ns_ggml = (time.perf_counter() - t0) / rows.size * 1e9
                    for k, q in enumerate([ours, theirs]):
                        y = dequantize(q.reshape(rows.shape[0], -1), qt).reshape(rows.shape)
                        se[k] += float(((y.astype(np.float64) - rows) ** 2).sum())
                    sx += float((rows.astype(np.float64) ** 2).sum())
                    ns[0] += ns_ours
                    ns[1] += ns_ggml
                k = len([r for r in ROW_LENS if r % block == 0])
                a, b = se[0] / sx, se[1] / sx
                print(f"{name:7} {dname:13} {a:10.3e} {b:10.3e} {a / b:6.3f}  "
                      f"{ns[0] / k:12.0f} {ns[1] / k:6.0f}", flush=True)


if __name__ == "__main__":
    main()
