"""minfer's K-quant and IQ4 quantizers against llama.cpp's own (ggml_quantize_chunk).

For Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS, on gaussian data and on real weights of
SmolLM2-135M-Instruct ($MINFER_SMOLLM2; rows of blk.0-1 ffn_down and of the token
embeddings, dequantized by gguf-py):
  (a) our bytes decode with gguf.quants.dequantize to exactly the floats our own
      dequantize_row gives (so the layout is ggml's, bit for bit);
  (b) our NMSE = sum((deq - x)^2) / sum(x^2) is at most 1.10x that of ggml's quantizer
      (prebuilt libggml-base.so, $MINFER_GGML_BASE_LIB, no importance matrix), both decoded
      by gguf-py.
The library, the tool ($MINFER_QUANT_ROW_TOOL) and the model are required: a missing one is
a failure, not a skip. Run with -s to see the NMSE of both sides.
"""
import ctypes
import os
import subprocess
import tempfile

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T, GGUFReader
from gguf.quants import dequantize

LIB = os.environ.get("MINFER_GGML_BASE_LIB", "")
TOOL = os.environ.get("MINFER_QUANT_ROW_TOOL", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")
TYPES = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS]
MAX_RATIO = 1.10


def ggml_quantize(qtype, rows: np.ndarray) -> np.ndarray:
    assert os.path.isfile(LIB), f"MINFER_GGML_BASE_LIB={LIB!r} is missing (run scripts/setup.sh)"
    fn = ctypes.CDLL(LIB).ggml_quantize_chunk
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_int64, ctypes.c_void_p]
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    out = np.zeros(rows.size * 2 + 1024, np.uint8)
    n = fn(int(qtype), rows.ctypes.data, out.ctypes.data, 0, rows.shape[0], rows.shape[1], None)
    return out[:n].copy()


def tool(*args) -> None:
    assert os.path.isfile(TOOL), f"MINFER_QUANT_ROW_TOOL={TOOL!r} is not a built quant-row-tool"
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"quant-row-tool {' '.join(args)}: {r.stderr}"


def our_quantize(qtype, rows: np.ndarray, tmp) -> np.ndarray:
    src, dst = os.path.join(tmp, "x.f32"), os.path.join(tmp, "q.bin")
    np.ascontiguousarray(rows, dtype=np.float32).tofile(src)
    tool("quant", qtype.name, src, dst, str(rows.shape[1]))
    return np.fromfile(dst, dtype=np.uint8)


def our_dequantize(qtype, raw: np.ndarray, n_per_row: int, tmp) -> np.ndarray:
    src, dst = os.path.join(tmp, "q2.bin"), os.path.join(tmp, "y.f32")
    raw.tofile(src)
    tool("dequant", qtype.name, src, dst, str(n_per_row))
    return np.fromfile(dst, dtype=np.float32)


def gguf_py_dequantize(qtype, raw: np.ndarray, shape) -> np.ndarray:
    return np.ascontiguousarray(dequantize(raw.reshape(shape[0], -1), qtype), np.float32).reshape(shape)


def nmse(x, y) -> float:
    x = x.astype(np.float64)
    return float(((y.astype(np.float64) - x) ** 2).sum() / (x ** 2).sum())


def smollm2_rows():
    assert os.path.isfile(SMOLLM2), f"MINFER_SMOLLM2={SMOLLM2!r} is missing (run scripts/setup.sh)"
    tensors = {t.name: t for t in GGUFReader(SMOLLM2).tensors}
    out = {}
    # ffn_down rows are 1536 long: whole real rows for every type.
    down = [tensors[f"blk.{i}.ffn_down.weight"] for i in (0, 1)]
    out["smollm2-ffn_down"] = np.concatenate(
        [dequantize(t.data[:24], t.tensor_type) for t in down]).astype(np.float32)
    # Embedding rows are 576 long (not a multiple of 256): regrouped into rows of 4096.
    e = tensors["token_embd.weight"]
    emb = dequantize(e.data[1000:1000 + 24 * 4096 // 576], e.tensor_type).reshape(-1)
    out["smollm2-embd"] = emb[: (emb.size // 4096) * 4096].reshape(-1, 4096).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def datasets():
    rng = np.random.default_rng(20240601)
    d = {"gaussian": rng.standard_normal((24, 4096)).astype(np.float32)}
    d.update(smollm2_rows())
    return d


@pytest.mark.parametrize("qtype", TYPES, ids=[t.name for t in TYPES])
def test_kquant_vs_ggml(qtype, datasets):
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, rows in datasets.items():
            ours = our_quantize(qtype, rows, tmp)
            theirs = ggml_quantize(qtype, rows)
            assert ours.size == theirs.size, f"{qtype.name} {name}: {ours.size} bytes, ggml {theirs.size}"
            y_ours = gguf_py_dequantize(qtype, ours, rows.shape)
            y_self = our_dequantize(qtype, ours, rows.shape[1], tmp).reshape(rows.shape)
            assert np.array_equal(y_ours.view(np.uint32), y_self.view(np.uint32)), \
                f"{qtype.name} {name}: gguf-py decodes our bytes differently from dequantize_row"
            e_ours = nmse(rows, y_ours)
            e_ggml = nmse(rows, gguf_py_dequantize(qtype, theirs, rows.shape))
            ratio = e_ours / e_ggml
            worst = max(worst, ratio)
            print(f"\n  {qtype.name:6} {name:17} minfer {e_ours:.4e}  ggml {e_ggml:.4e}  ratio {ratio:.3f}", end="")
            assert ratio <= MAX_RATIO, f"{qtype.name} {name}: NMSE {e_ours:.4e} vs ggml {e_ggml:.4e}"
    assert worst > 0.0
