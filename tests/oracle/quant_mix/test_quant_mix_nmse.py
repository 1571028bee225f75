#!/usr/bin/env python3
"""Model-level quantization error of `minfer quantize` against llama.cpp's, per type.

Makes a random-weight llama-architecture F32 model with SmolLM2's tokenizer
(minfer-make-test-model), quantizes it to each llama-quantize type with llama.cpp
(llama-oracle quantize) and with minfer (minfer quantize), runs all files through llama.cpp
(llama-oracle logits) on a fixed 64-token sequence and compares

    NMSE(x) = sum((logits_x - logits_f32)^2) / sum(logits_f32^2)

Passes when, for every type, minfer's file loads and runs in llama.cpp and
NMSE(minfer) <= 1.25 * NMSE(llama.cpp). The mix of per-tensor types is what this checks: a
tensor quantized to a smaller type than llama.cpp chooses shows up as extra error. Per-tensor
type differences are printed (gguf-py, when importable) to help find the tensor at fault.

Dimensions are multiples of 256 so K-quants apply everywhere; n_head / n_head_kv = 4 and four
layers exercise llama.cpp's GQA and layer-position rules; output.weight is separate from
token_embd so both of their rules apply. The F32 file is ~113 MB; the run takes 1.5-2.5
minutes on 2 cores, most of it in the 22 quantizations (each type's timings are printed).

Environment (set by the CMake registration; missing binaries or model FAIL the test):
  MINFER_LLAMA_ORACLE      build/tests/llama-oracle
  MINFER_MAKE_TEST_MODEL   build/bin/minfer-make-test-model
  MINFER_BIN               build/bin/minfer
  MINFER_VOCAB_MODEL       GGUF whose tokenizer is used (default: SmolLM2-135M-Instruct-Q4_1.gguf
                           in $MINFER_MODEL_DIR or ~/.cache/minfer/models)
  MINFER_TEST_TMPDIR       where the temporary files go (default: the system temp dir)
  MINFER_TEST_THREADS      quantization threads (default 2)
  MINFER_QUANT_MIX_TYPES   comma-separated subset of types to run (default: all)

Run by hand:  python3 test_quant_mix_nmse.py [--oracle-only]
  --oracle-only  only llama.cpp's column (for looking at the oracle without minfer); exits 0.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

TYPES = ["Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
         "IQ4_NL", "IQ4_XS"]
MAX_RATIO = 1.25
N_TOKENS = 64
MODEL_FLAGS = ["--arch", "llama", "--n-embd", "256", "--n-layer", "4", "--n-head", "8",
               "--n-head-kv", "2", "--n-ff", "768", "--ctx", "512", "--untied", "--type", "F32",
               "--seed", "1234"]


class Failure(Exception):
    pass


def env_path(name, default=None):
    p = os.environ.get(name) or default
    if not p:
        raise Failure(f"{name} is not set (the CMake registration sets it)")
    if not os.path.isfile(p):
        raise Failure(f"{name}: '{p}' does not exist (build it, or run scripts/setup.sh)")
    return p


def run(cmd, what):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failure(f"{what} failed (exit {r.returncode}): {' '.join(cmd)}\n"
                      f"--- stderr ---\n{r.stderr[-4000:]}--- stdout ---\n{r.stdout[-2000:]}")
    return r.stdout, time.monotonic() - t0


def token_ids(n_vocab):
    # A fixed spread of ids over the whole vocabulary (a random model has no use for real text;
    # rows of every part of token_embd get read). 7919 is prime, so the ids are distinct.
    return [(17 + 7919 * i) % n_vocab for i in range(N_TOKENS)]


def logits(oracle, model, tokens, out):
    stdout, secs = run([oracle, "logits", model, "--tokens", ",".join(map(str, tokens)),
                        "--out", out, "-t", "1"], f"llama.cpp logits of {os.path.basename(model)}")
    meta = json.loads(stdout.strip().splitlines()[-1])
    a = np.fromfile(out, dtype=np.float32)
    os.remove(out)
    if a.size != meta["n_tokens"] * meta["n_vocab"]:
        raise Failure(f"{out}: {a.size} floats, expected {meta['n_tokens']} x {meta['n_vocab']}")
    a = a.reshape(meta["n_tokens"], meta["n_vocab"]).astype(np.float64)
    if not np.isfinite(a).all():
        raise Failure(f"logits of {model} have {np.count_nonzero(~np.isfinite(a))} non-finite values")
    return a, secs


def nmse(x, ref):
    return float(np.sum((x - ref) ** 2) / np.sum(ref ** 2))


def tensor_types(path):
    try:
        import gguf  # gguf-py; only for the diagnostic
    except ImportError:
        return None
    r = gguf.GGUFReader(path)
    return {t.name: t.tensor_type.name for t in r.tensors}


def type_diff(ours, theirs):
    """Tensors whose type differs, as 'name: ours vs llama.cpp' lines."""
    if ours is None or theirs is None:
        return []
    lines = []
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name, "-"), theirs.get(name, "-")
        if a != b:
            lines.append(f"    {name}: minfer {a} vs llama.cpp {b}")
    return lines


def main():
    oracle_only = "--oracle-only" in sys.argv[1:]
    model_dir = os.environ.get("MINFER_MODEL_DIR") or os.path.expanduser("~/.cache/minfer/models")
    oracle = env_path("MINFER_LLAMA_ORACLE")
    maker = env_path("MINFER_MAKE_TEST_MODEL")
    minfer = None if oracle_only else env_path("MINFER_BIN")
    vocab = env_path("MINFER_VOCAB_MODEL", os.path.join(model_dir, "SmolLM2-135M-Instruct-Q4_1.gguf"))
    threads = os.environ.get("MINFER_TEST_THREADS", "2")
    types = TYPES
    if os.environ.get("MINFER_QUANT_MIX_TYPES"):
        types = [t.strip().upper() for t in os.environ["MINFER_QUANT_MIX_TYPES"].split(",") if t.strip()]
        unknown = [t for t in types if t not in TYPES]
        if unknown:
            raise Failure(f"MINFER_QUANT_MIX_TYPES: unknown types {unknown}; known: {TYPES}")

    with tempfile.TemporaryDirectory(prefix="quant-mix-", dir=os.environ.get("MINFER_TEST_TMPDIR")) as tmp:
        f32 = os.path.join(tmp, "model-f32.gguf")
        stdout, _ = run([maker, "--vocab-from", vocab, "--out", f32] + MODEL_FLAGS, "minfer-make-test-model")
        n_vocab = json.loads(stdout.strip().splitlines()[-1])["n_vocab"]
        tokens = token_ids(n_vocab)
        out = os.path.join(tmp, "logits.f32")
        ref, _ = logits(oracle, f32, tokens, out)
        if np.ptp(ref, axis=1).min() <= 0:
            raise Failure("F32 logits are constant along some row: the test model is degenerate")
        print(f"F32 model: {os.path.getsize(f32) / 2**20:.1f} MiB, n_vocab {n_vocab}, "
              f"{N_TOKENS} tokens, logits std {ref.std():.3f}")

        header = (f"{'type':8} {'NMSE minfer':>12} {'NMSE llama':>12} {'ratio':>7}  {'MiB ours/llama':>15}"
                  f"  {'quant s ours/llama':>18}  result")
        print(header)
        print("-" * len(header))
        failures = []
        for t in types:
            theirs = os.path.join(tmp, f"llama-{t}.gguf")
            _, secs_theirs = run([oracle, "quantize", f32, theirs, t, "-t", threads], f"llama.cpp quantize {t}")
            l_theirs, _ = logits(oracle, theirs, tokens, out)
            e_theirs = nmse(l_theirs, ref)
            size_theirs = os.path.getsize(theirs) / 2**20
            if oracle_only:
                os.remove(theirs)
                print(f"{t:8} {'-':>12} {e_theirs:12.4e} {'-':>7}  {'-':>6} / {size_theirs:6.1f}"
                      f"  {'-':>7} / {secs_theirs:7.2f}")
                continue
            ours = os.path.join(tmp, f"minfer-{t}.gguf")
            try:
                _, secs_ours = run([minfer, "quantize", f32, ours, t, "-t", threads], f"minfer quantize {t}")
                l_ours, _ = logits(oracle, ours, tokens, out)  # also: our file loads in llama.cpp
            except Failure as e:
                failures.append(f"{t}: {e}")
                print(f"{t:8} {'error':>12} {e_theirs:12.4e} {'-':>7}  {'-':>15}  {'-':>18}  FAIL")
                for p in (ours, theirs):
                    if os.path.exists(p):
                        os.remove(p)
                continue
            e_ours = nmse(l_ours, ref)
            ratio = e_ours / e_theirs if e_theirs > 0 else (1.0 if e_ours == 0 else float("inf"))
            ok = ratio <= MAX_RATIO
            print(f"{t:8} {e_ours:12.4e} {e_theirs:12.4e} {ratio:7.3f}  "
                  f"{os.path.getsize(ours) / 2**20:6.1f} / {size_theirs:6.1f}  "
                  f"{secs_ours:7.2f} / {secs_theirs:7.2f}  {'ok' if ok else 'FAIL'}")
            diff = type_diff(tensor_types(ours), tensor_types(theirs))
            if diff:
                print(f"  {len(diff)} tensors differ in type:")
                print("\n".join(diff[:12] + (["    ..."] if len(diff) > 12 else [])))
            if not ok:
                failures.append(f"{t}: NMSE {e_ours:.4e} is {ratio:.3f}x llama.cpp's {e_theirs:.4e} "
                                f"(limit {MAX_RATIO}x)")
            os.remove(ours)
            os.remove(theirs)

    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print("\nall types within %.2fx of llama.cpp" % MAX_RATIO if not oracle_only else "\n(oracle only)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print(f"test_quant_mix_nmse: FAIL: {e}", file=sys.stderr)
        sys.exit(1)
