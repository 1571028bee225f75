"""minfer's reference (de)quantizers against gguf-py (PyPI `gguf`, bit-exact with ggml).

(a) random bytes of every supported type dequantize to the same float bits as
    gguf.quants.dequantize (Q8_K, which gguf-py lacks, against a numpy decode of its layout);
(b) tensors quantized by gguf-py dequantize to the same bits;
(c) our quantizers write the same bytes as gguf.quants.quantize on varied data;
(d) every tensor of SmolLM2-135M-Instruct ($MINFER_SMOLLM2) dequantizes to the same bits.

Comparisons are on float bit patterns, NaN payloads included. Every test prints its counts
(`bit-exact Q4_K: 4096/4096 blocks`); run with -s to see them.

Inputs left out of (c) on purpose, with the reason:
  - signalling NaNs into F16: numpy keeps them signalling, we (like gcc's _Float16) quiet them;
  - NaNs into Q4_0 ... Q8_0: gguf-py's result depends on numpy's NaN reduction order;
  - Q4_1/Q5_1 blocks whose minimum or maximum is a zero present with both signs: numpy's SIMD
    min/max returns either zero depending on position, so the sign of the stored m (or of
    max - min) is not a property of the values. (Q4_0/Q5_0/Q8_0 pick the first element of
    largest magnitude, which is well defined, so their signed-zero blocks are tested.)
"""
import os
import subprocess
import tempfile

import numpy as np
import gguf
from gguf.quants import dequantize, quantize

T = gguf.GGMLQuantizationType
TOOL = os.environ.get("MINFER_QUANT_TOOL", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")

DEQUANT_TYPES = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K,
                 T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K, T.IQ4_NL, T.IQ4_XS]
QUANT_TYPES = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
SEEDS = [1, 2, 3, 4]


def run_tool(mode, qtype, payload: bytes) -> bytes:
    assert os.path.isfile(TOOL), f"MINFER_QUANT_TOOL={TOOL!r} is not a built quant-tool"
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in"), os.path.join(d, "out")
        with open(src, "wb") as f:
            f.write(payload)
        r = subprocess.run([TOOL, mode, qtype.name, src, dst], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"quant-tool {mode} {qtype.name}: {r.stderr}"
        with open(dst, "rb") as f:
            return f.read()


def our_dequant(qtype, raw: np.ndarray) -> np.ndarray:
    return np.frombuffer(run_tool("dequant", qtype, raw.tobytes()), dtype=np.uint32)


def our_quant(qtype, x: np.ndarray) -> np.ndarray:
    return np.frombuffer(run_tool("quant", qtype, x.astype(np.float32).tobytes()), dtype=np.uint8)


def ref_dequant(qtype, raw: np.ndarray) -> np.ndarray:
    """Reference float bits of raw blocks (random scales may be inf/NaN: no warnings)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).ravel()
    with np.errstate(all="ignore"):
        return _ref_dequant(qtype, raw)


def _ref_dequant(qtype, raw: np.ndarray) -> np.ndarray:
    if qtype == T.Q8_K:
        # gguf-py has no Q8_K: block = f32 d, int8 qs[256], int16 bsums[16]; x = d * qs.
        b = raw.reshape(-1, 292)
        d = b[:, :4].copy().view(np.float32)
        qs = b[:, 4:260].copy().view(np.int8).astype(np.float32)
        return (d * qs).astype(np.float32).ravel().view(np.uint32)
    return np.ascontiguousarray(dequantize(raw, qtype), dtype=np.float32).ravel().view(np.uint32)


def block_elems(qtype):
    return gguf.GGML_QUANT_SIZES[qtype][0]


def count_exact_blocks(qtype, ours: np.ndarray, ref: np.ndarray):
    """(exact blocks, total blocks, first bad element) comparing float bit patterns."""
    assert ours.shape == ref.shape, f"{qtype.name}: {ours.shape} values vs {ref.shape}"
    same = (ours == ref).reshape(-1, block_elems(qtype)).all(axis=1)
    bad = np.flatnonzero(ours != ref)
    return int(same.sum()), same.size, (int(bad[0]) if bad.size else None)


def report(label, qtype, exact, total):
    unit = "blocks" if block_elems(qtype) > 1 else "values"
    print(f"\nbit-exact {qtype.name}: {exact}/{total} {unit} ({label})", flush=True)


# ---- (a) random bytes ---------------------------------------------------------------------

def test_dequantize_random_bytes():
    failures = []
    for qtype in DEQUANT_TYPES:
        type_size = gguf.GGML_QUANT_SIZES[qtype][1]
        n_blocks = 4096 if block_elems(qtype) > 1 else 65536
        exact = total = 0
        for seed in SEEDS:
            rng = np.random.default_rng(seed * 1000 + int(qtype))
            raw = rng.integers(0, 256, size=(n_blocks // len(SEEDS)) * type_size, dtype=np.uint8)
            ours, ref = our_dequant(qtype, raw), ref_dequant(qtype, raw)
            e, t, bad = count_exact_blocks(qtype, ours, ref)
            exact, total = exact + e, total + t
            if bad is not None:
                failures.append(f"{qtype.name} seed {seed}: element {bad}: ours 0x{ours[bad]:08x}, "
                                f"gguf-py 0x{ref[bad]:08x}")
        report(f"random bytes, {len(SEEDS)} seeds", qtype, exact, total)
    assert not failures, "\n".join(failures)


def test_dequantize_every_f16_and_bf16_pattern():
    raw = np.arange(65536, dtype=np.uint16).view(np.uint8)
    for qtype in (T.F16, T.BF16):
        e, t, bad = count_exact_blocks(qtype, our_dequant(qtype, raw), ref_dequant(qtype, raw))
        report("all 65536 patterns", qtype, e, t)
        assert bad is None, f"{qtype.name}: pattern 0x{bad:04x} differs"


# ---- inputs for (b) and (c) ---------------------------------------------------------------

def varied_data(qtype, rng) -> dict:
    """Named float32 arrays of 256 blocks of 32 floats: the shapes of data that matter."""
    nb = 256
    n = nb * 32
    g = rng.standard_normal(n).astype(np.float32)
    u = rng.uniform(-1, 1, n).astype(np.float32)
    cases = {
        "gaussian 1": g,
        "gaussian 1e-3": g * np.float32(1e-3),
        "gaussian 1e3": g * np.float32(1e3),
        "gaussian 1e-6": g * np.float32(1e-6),
        "uniform [-1,1]": u,
        "uniform [0,1]": np.abs(u),
        "uniform [-1,0]": -np.abs(u),
    }
    # Blocks of zeros and constant blocks between gaussian blocks.
    z = g.copy().reshape(nb, 32)
    z[::3] = 0.0
    z[1::3] = rng.choice(np.array([1.0, -2.5, 7e-3, -1e4, 65504.0], np.float32), size=(len(z[1::3]), 1))
    cases["zero and constant blocks"] = z.ravel()
    # The element of largest magnitude is negative in every block.
    m = np.abs(g).reshape(nb, 32)
    m[np.arange(nb), rng.integers(0, 32, nb)] = -np.float32(5.0)
    cases["negative extreme"] = m.ravel() * rng.choice(np.array([1, 1e-2, 30], np.float32), size=n)
    # Ties of magnitude between a positive and a negative extreme.
    t = g.copy().reshape(nb, 32) * np.float32(0.1)
    t[:, 3], t[:, 17] = 2.0, -2.0
    t[::2, 3], t[::2, 17] = -2.0, 2.0
    cases["magnitude ties"] = t.ravel()
    # Tiny values: fp32 subnormals, fp16-subnormal scales, blocks whose 1/d overflows.
    cases["subnormal fp32"] = g * np.float32(1e-40)
    cases["tiny 1e-30"] = g * np.float32(1e-30)
    cases["tiny 1e-38"] = g * np.float32(1e-38)
    cases["fp16-subnormal"] = g * np.float32(1e-5)
    # Large values: fp16 overflow of the scale, max - min overflowing fp32.
    cases["large 1e5"] = g * np.float32(1e5)
    cases["large 1e30"] = g * np.float32(1e30)
    big = g.copy().reshape(nb, 32)
    big[:, 0], big[:, 1] = 3e38, -3e38
    cases["near FLT_MAX"] = big.ravel()
    # Rounding ties of the quantizers: with extreme -8 (Q4_0), -16 (Q5_0), range 0..15 (Q4_1),
    # 0..31 (Q5_1) or 127 (Q8_0) the step is 1, and half-integers land on every tie.
    half = (rng.integers(-40, 40, n) + np.float32(0.5)).astype(np.float32).reshape(nb, 32)
    for name, lo, hi, pin in (("ties Q4_0", -8, 7, -8), ("ties Q5_0", -16, 15, -16),
                              ("ties Q4_1", 0, 15, None), ("ties Q5_1", 0, 31, None),
                              ("ties Q8_0", -127, 127, 127)):
        b = np.clip(half, lo, hi - 0.5).astype(np.float32)
        b[:, 0] = lo if pin is None else pin
        b[:, 1] = hi if pin is None else b[:, 1]
        cases[name] = b.ravel()
    # fp16 / bf16 conversion ties: exactly halfway between neighbours, and 1 ulp either side.
    h = rng.integers(0, 0x7bff, n, dtype=np.uint16)
    f = h.view(np.float16).astype(np.float32)
    nxt = (h + 1).view(np.float16).astype(np.float32)
    mid = ((f.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(np.float32)
    cases["fp16 ties"] = np.where(rng.integers(0, 2, n) == 1, mid, -mid).astype(np.float32)
    cases["fp16 ties +-1ulp"] = np.nextafter(mid, np.where(rng.integers(0, 2, n) == 1, np.inf, 0)).astype(np.float32)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    no_nan = lambda a: np.where(np.isnan(a), np.float32(1.0), a).astype(np.float32)
    cases["bf16 ties"] = no_nan(((bits & 0xffff0000) | 0x8000).view(np.float32))
    cases["random fp32 bits (no NaN)"] = no_nan(bits.view(np.float32))
    if qtype not in (T.Q4_1, T.Q5_1):
        sz = np.where(rng.integers(0, 2, n) == 1, np.float32(0.0), np.float32(-0.0)).reshape(nb, 32)
        sz[::2] = -0.0
        cases["signed zeros"] = sz.ravel()
    if qtype in (T.F16, T.BF16):
        special = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 65520.0, -65520.0,
                            65519.996, 3.4e38, 1e-45, 2.9802322e-08, 5.9604645e-08] * 32, np.float32)
        cases["inf, quiet NaN, zeros, limits"] = special[: len(special) // 32 * 32]
    if qtype == T.BF16:
        cases["signalling NaN"] = np.array([0x7f800001, 0xff800001, 0x7fbfffff, 0x7f80ffff] * 8,
                                           np.uint32).view(np.float32)
    return cases


# ---- (b) gguf-py's quantized tensors ------------------------------------------------------

def test_dequantize_gguf_py_quantized():
    failures = []
    for qtype in QUANT_TYPES:
        exact = total = 0
        for seed in SEEDS:
            for name, x in varied_data(qtype, np.random.default_rng(seed)).items():
                with np.errstate(all="ignore"):
                    raw = np.ascontiguousarray(quantize(x, qtype)).view(np.uint8).ravel()
                ours, ref = our_dequant(qtype, raw), ref_dequant(qtype, raw)
                e, t, bad = count_exact_blocks(qtype, ours, ref)
                exact, total = exact + e, total + t
                if bad is not None:
                    failures.append(f"{qtype.name} '{name}' seed {seed}: element {bad}")
        report("gguf-py quantized, varied data", qtype, exact, total)
    assert not failures, "\n".join(failures[:20])


# ---- (c) our quantizers vs gguf-py --------------------------------------------------------

def test_quantize_matches_gguf_py():
    failures = []
    for qtype in QUANT_TYPES:
        type_size = gguf.GGML_QUANT_SIZES[qtype][1]
        exact = total = 0
        with np.errstate(all="ignore"):
            for seed in SEEDS:
                for name, x in varied_data(qtype, np.random.default_rng(seed)).items():
                    ref = np.ascontiguousarray(quantize(x, qtype)).view(np.uint8).ravel()
                    ours = our_quant(qtype, x)
                    assert ours.shape == ref.shape, f"{qtype.name} '{name}': size {ours.shape} vs {ref.shape}"
                    same = (ours == ref).reshape(-1, type_size).all(axis=1)
                    exact, total = exact + int(same.sum()), total + same.size
                    if not same.all():
                        i = int(np.flatnonzero(~same)[0])
                        blk = x.reshape(-1, block_elems(qtype))[i]
                        failures.append(f"{qtype.name} '{name}' seed {seed} block {i}: "
                                        f"ours {ours.reshape(-1, type_size)[i].tobytes().hex()} "
                                        f"gguf-py {ref.reshape(-1, type_size)[i].tobytes().hex()} "
                                        f"input {blk.tolist()}")
        report("our quantize vs gguf-py, varied data", qtype, exact, total)
    assert not failures, "\n".join(failures[:10])


# ---- (d) SmolLM2 --------------------------------------------------------------------------

def test_smollm2_every_tensor():
    assert SMOLLM2 and os.path.isfile(SMOLLM2), (
        f"MINFER_SMOLLM2={SMOLLM2!r} is not a file: point it at SmolLM2-135M-Instruct-Q4_1.gguf "
        "(scripts/setup.sh puts it in ~/.cache/minfer/models)")
    reader = gguf.GGUFReader(SMOLLM2)
    per_type = {}
    failures = []
    for t in reader.tensors:
        qtype = t.tensor_type
        raw = np.ascontiguousarray(t.data).view(np.uint8).ravel()
        ours, ref = our_dequant(qtype, raw), ref_dequant(qtype, raw)
        e, n, bad = count_exact_blocks(qtype, ours, ref)
        c = per_type.setdefault(qtype, [0, 0, 0])
        c[0], c[1], c[2] = c[0] + e, c[1] + n, c[2] + 1
        if bad is not None:
            failures.append(f"{t.name} ({qtype.name}): element {bad}: ours 0x{ours[bad]:08x}, "
                            f"gguf-py 0x{ref[bad]:08x}")
    for qtype, (e, n, k) in sorted(per_type.items()):
        report(f"SmolLM2, {k} tensors", qtype, e, n)
    assert sum(c[2] for c in per_type.values()) == len(reader.tensors) > 0
    assert not failures, "\n".join(failures[:20])


# ---- the tool itself ----------------------------------------------------------------------

def test_tool_refuses_bad_input():
    assert os.path.isfile(TOOL), f"MINFER_QUANT_TOOL={TOOL!r} is not a built quant-tool"
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in"), os.path.join(d, "out")
        with open(src, "wb") as f:
            f.write(bytes(100))
        cases = [
            (["dequant", "Q4_K", src, dst], "not a multiple of the Q4_K block size 144"),
            (["quant", "Q4_0", src, dst], "not a whole number of Q4_0 blocks of 32 floats"),
            (["dequant", "Q9_K", src, dst], "unknown type 'Q9_K'"),
            (["dequant", "Q8_1", src, dst], "cannot dequantize type Q8_1"),
            (["dequant", "F16", os.path.join(d, "missing"), dst], "cannot open"),
            (["squash", "F16", src, dst], "unknown mode 'squash'"),
            (["dequant", "F16"], "usage"),
        ]
        for args, message in cases:
            r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)
            assert r.returncode != 0 and message in r.stderr, (args, r.returncode, r.stderr)
        print(f"\nquant-tool: {len(cases)}/{len(cases)} bad inputs refused with a message")
