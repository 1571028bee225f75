#!/usr/bin/env python3
"""minfer vs llama.cpp speed, side by side on the same machine, models and threads.

Makes (or reuses) the test models: random weights in the exact shapes of Qwen2.5-0.5B and
Qwen3-0.6B with the real Qwen2 tokenizer (tools/make-test-model.cpp, F16), quantized by
`minfer quantize`, plus the real SmolLM2-135M-Instruct (Q4_1) and Gemma 3 270M (Q4_K_M) of the
model cache (`smollm2`, `gemma3`). `qwen3-30b-a3b` is Qwen3-30B-A3B's layer (128 experts of
768, 8 used, 32/4 heads of 128) with 4 layers instead of 48 and SmolLM2's 49152-token
vocabulary, so that the experts, not the output projection, dominate a decode step (the real
model's vocabulary is 151936). Then runs
`minfer bench` and `llama-oracle bench` (llama.cpp from node-llama-cpp) interleaved, one
repetition each per round, so both see the same machine load; reports the median t/s of each
engine, the ratio, and decode bandwidth (weight bytes read per token x tg t/s) as a fraction of
the read-bandwidth ceiling measured by minfer-membw with the same thread count, once per round
beside the engines' runs (the median of the rounds: on a shared machine the bandwidth on offer
drifts over minutes, and a ceiling taken once would lean on the moment it was taken). A second table
gives each engine's resident memory (VmRSS right after the tg test, i.e. while decoding, and
the process peak VmHWM) against the model file + minfer's KV cache for the same context, and
its load time (load_seconds: from opening the file to the first decoded token, each engine
timing itself; the file is in the page cache after the first run, so these are warm loads).

With --ik-bench PATH a third engine runs in the same rounds: ik_llama.cpp's llama-bench (built
from its public repository as a measuring tool, outside CI; no code taken), with its run-time
repacking (-rtr 1) and flash attention on, depth 0 only. With --isa avx2 minfer runs its AVX2
table (MINFER_ISA=avx2) and llama.cpp its AVX2 build (node-llama-cpp's libggml-cpu-haswell.so,
the only CPU variant in a private backend folder); ik_llama.cpp has no run-time choice, so
--ik-bench must then name a build without AVX-512 (-DGGML_NATIVE=OFF -DGGML_AVX2=ON).

With -d (llama-bench's depth, a list: -d 0,4096,16384) every test also runs with that many
tokens already in the KV cache, llama.cpp with flash attention on (its fastest CPU setting), and
the decode bandwidth counts the KV cache bytes a step reads (K and V of every layer up to the
depth) beside the weights. --kv-type picks the cache type of both engines.

  python3 bench/compare.py [--build build] [-t 2] [-p 512] [-n 128] [-d 0] [--kv-type f16]
      [--rounds 5] [--models qwen2.5-0.5b:Q4_0,Q4_K_M,Q8_0 ...] [--json out.json]
      [--isa avx2] [--ik-bench /path/to/ik_llama.cpp/build/bin/llama-bench]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODELS = ["qwen2.5-0.5b:Q4_0,Q4_K_M,Q8_0,Q5_K_M,Q6_K",
                  "qwen3-0.6b:Q4_0,Q4_K_M,Q8_0,Q2_K,Q3_K_M,Q5_K_M,Q6_K,IQ4_NL,IQ4_XS,F16,BF16", "smollm2"]


def log(msg):
    print(f"[compare] {msg}", file=sys.stderr, flush=True)


def run_json(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"command failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    text = out.stdout.strip()
    return json.loads(text[text.index("["):] if not text.startswith("{") else text)


def ensure_models(a):
    """[(label, path)] for the requested shapes and types, making missing files."""
    vocab = os.path.join(ROOT, ".deps/llama.cpp/models/ggml-vocab-qwen2.gguf")
    os.makedirs(a.model_dir, exist_ok=True)
    out = []
    for spec in a.models:
        shape, _, types = spec.partition(":")
        cache = os.path.expanduser(os.environ.get("MINFER_MODEL_DIR", "~/.cache/minfer/models"))
        if shape == "smollm2":
            out.append(("SmolLM2-135M Q4_1", os.path.join(cache, "SmolLM2-135M-Instruct-Q4_1.gguf")))
            continue
        if shape == "gemma3":
            out.append(("Gemma-3-270M Q4_K_M", os.path.join(cache, "gemma3-270m-Q4_K_M.gguf")))
            continue
        f16 = os.path.join(a.model_dir, f"{shape}-F16.gguf")
        if not os.path.exists(f16):
            log(f"making {f16}")
            extra = []
            if shape == "qwen3-30b-a3b":
                extra = ["--n-layer", "4"]
                shape_vocab = os.path.join(cache, "SmolLM2-135M-Instruct-Q4_1.gguf")
            elif shape.startswith("llama-3"):
                shape_vocab = os.path.join(ROOT, ".deps/llama.cpp/models/ggml-vocab-llama-bpe.gguf")
            else:
                shape_vocab = vocab
            subprocess.run([os.path.join(a.build, "bin/minfer-make-test-model"), "--preset", shape, "--vocab-from",
                            shape_vocab, "--type", "F16", "--out", f16] + extra, check=True, stdout=subprocess.DEVNULL)
        for t in types.split(","):
            q = os.path.join(a.model_dir, f"{shape}-{t}.gguf")
            if not os.path.exists(q):
                log(f"quantizing {q}")
                subprocess.run([os.path.join(a.build, "bin/minfer"), "quantize", f16, q, t], check=True,
                               stdout=subprocess.DEVNULL)
            out.append((f"{shape} {t}", q))
    return out


def weight_bytes_per_token(path):
    """Bytes of the 2-D weights a decode step reads (token_embd is read for one row only,
    unless it is also the output projection)."""
    import gguf
    r = gguf.GGUFReader(path)
    names = {t.name for t in r.tensors}
    arch = r.fields["general.architecture"].contents()
    used = r.fields.get(f"{arch}.expert_used_count")
    count = r.fields.get(f"{arch}.expert_count")
    expert_frac = used.contents() / count.contents() if used and count else 1.0  # experts a token reads
    tied = "output.weight" not in names
    total = 0
    for t in r.tensors:
        if len(t.shape) < 2:
            continue
        if t.name == "token_embd.weight" and not tied:
            continue
        total += int(t.n_bytes) * (expert_frac if t.name.endswith("_exps.weight") else 1.0)
    return int(total)


KV_BYTES_PER_VALUE = {"f32": 4.0, "f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


def kv_bytes_per_position(path, kv_type):
    """Bytes of K and V one cached position holds over all layers (sliding-window layers
    count too: at the depths measured here a window of n_swa reads min(depth, n_swa) rows,
    which this ignores, so it is an upper bound for such models)."""
    import gguf
    r = gguf.GGUFReader(path)
    arch = r.fields["general.architecture"].contents()
    get = lambda k, d=None: r.fields[f"{arch}.{k}"].contents() if f"{arch}.{k}" in r.fields else d
    n_layer, n_head = get("block_count"), get("attention.head_count")
    n_kv = get("attention.head_count_kv", n_head)
    k_len = get("attention.key_length", get("embedding_length") // n_head)
    v_len = get("attention.value_length", k_len)
    return n_layer * n_kv * (k_len + v_len) * KV_BYTES_PER_VALUE[kv_type]


def llama_bins_with_only(variant):
    """A folder holding node-llama-cpp's one CPU variant `variant` (e.g. haswell: AVX2), for
    llama-oracle's MINFER_LLAMA_BINS: ggml loads the best-scoring variant of a folder."""
    found = glob.glob(os.path.join(ROOT, ".deps/npm/node_modules/@node-llama-cpp/*/bins/*/libggml-cpu-" + variant + ".so"))
    if not found:
        raise SystemExit(f"no libggml-cpu-{variant}.so under .deps/npm (scripts/setup.sh installs node-llama-cpp)")
    d = tempfile.mkdtemp(prefix="llama-bins-")
    os.symlink(found[0], os.path.join(d, os.path.basename(found[0])))
    return d


def test_name(r):
    t = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
    return t + (f" @ d{r['n_depth']}" if r.get("n_depth") else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model-dir", default=os.path.expanduser("~/.cache/minfer/bench"))
    ap.add_argument("--models", nargs="*", default=DEFAULT_MODELS)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-d", default="0", help="depths: tokens in the cache before each test (comma-separated)")
    ap.add_argument("--kv-type", default="f16", choices=sorted(KV_BYTES_PER_VALUE))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--isa", help="minfer's table (MINFER_ISA) and the matching llama.cpp build: avx2")
    ap.add_argument("--ik-bench", help="ik_llama.cpp's llama-bench: a third engine (depth 0)")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    minfer = os.path.join(a.build, "bin/minfer")
    oracle = os.path.join(a.build, "tests/llama-oracle")
    models = ensure_models(a)
    depths = [int(x) for x in a.d.split(",")]
    membw = [os.path.join(a.build, "bin/minfer-membw"), "-t", str(a.threads)]
    minfer_env, llama_env = dict(os.environ), dict(os.environ)
    if a.isa:
        minfer_env["MINFER_ISA"] = a.isa
        variants = {"avx2": "haswell"}
        if a.isa not in variants:
            raise SystemExit(f"--isa {a.isa}: no matching llama.cpp build known (avx2)")
        llama_env["MINFER_LLAMA_BINS"] = llama_bins_with_only(variants[a.isa])
    engines = ["minfer", "llama.cpp"] + (["ik_llama.cpp"] if a.ik_bench else [])

    samples = {}  # (label, engine, test) -> [t/s]
    memory = {}   # (label, engine, "rss"|"peak"|"budget") -> [bytes], after the tg test
    ceilings = []  # [GB/s] minfer-membw's best pass, one per round
    for rnd in range(a.rounds):
        ceilings.append(run_json(membw)["best_gbps"])
        log(f"round {rnd + 1}: read-bandwidth ceiling {ceilings[-1]:.1f} GB/s ({a.threads} threads)")
        for label, path in models:
            for depth in depths:
                runs = [("minfer", [minfer, "bench", path, "-o", "json", "--kv-type", a.kv_type], minfer_env),
                        ("llama.cpp", [oracle, "bench", path, "--kv-type", a.kv_type, "--flash-attn", "on"], llama_env)]
                if a.ik_bench and depth == 0:
                    runs.append(("ik_llama.cpp", [a.ik_bench, "-m", path, "-o", "json", "-rtr", "1", "-fa", "1",
                                                  "-ctk", a.kv_type, "-ctv", a.kv_type], None))
                for engine, cmd, env in runs:
                    depth_arg = ["-d", str(depth)] if engine != "ik_llama.cpp" else []
                    res = run_json(cmd + ["-p", str(a.p), "-n", str(a.n), *depth_arg, "-r", "1", "-t", str(a.threads)], env)
                    for r in res:
                        r.setdefault("n_depth", depth)
                        samples.setdefault((label, engine, test_name(r)), []).extend(r["samples_ts"])
                        if "load_seconds" in r and r is res[0] and depth == depths[0]:
                            memory.setdefault((label, engine, "load"), []).append(r["load_seconds"])
                        if r["n_gen"] and "rss_bytes" in r and depth == depths[0]:
                            memory.setdefault((label, engine, "rss"), []).append(r["rss_bytes"])
                            memory.setdefault((label, engine, "peak"), []).append(r["peak_rss_bytes"])
                            if "kv_bytes" in r:
                                memory.setdefault((label, "", "budget"), []).append(r["model_file_bytes"] + r["kv_bytes"])
        log(f"round {rnd + 1}/{a.rounds} done")

    ceiling = statistics.median(ceilings)
    rows = []
    for label, path in models:
        wb = weight_bytes_per_token(path)
        kvb = kv_bytes_per_position(path, a.kv_type)
        for depth in depths:
            for kind, n in (("pp", a.p), ("tg", a.n)):
                if n == 0:
                    continue
                test = f"{kind}{n}" + (f" @ d{depth}" if depth else "")
                m = statistics.median(samples[(label, "minfer", test)])
                l = statistics.median(samples[(label, "llama.cpp", test)])
                row = {"model": label, "test": test, "n_depth": depth, "kv_type": a.kv_type, "minfer_ts": m,
                       "llama_ts": l, "ratio": m / l}
                if (label, "ik_llama.cpp", test) in samples:
                    ik = statistics.median(samples[(label, "ik_llama.cpp", test)])
                    row.update(ik_ts=ik, ik_ratio=m / ik)
                if kind == "tg":  # a step reads the weights and the cache so far (on average depth + n/2 rows)
                    step = wb + kvb * (depth + n / 2)
                    row["bytes_per_token"] = step
                    row["minfer_bw_frac"] = step * m / 1e9 / ceiling
                    row["llama_bw_frac"] = step * l / 1e9 / ceiling
                rows.append(row)
    print(f"\n{' vs '.join(engines)}, {a.threads} threads{', ' + a.isa + ' builds' if a.isa else ''}, KV cache {a.kv_type}, "
          f"medians of {a.rounds} interleaved rounds; read-bandwidth ceiling {ceiling:.1f} GB/s (median of the rounds' "
          f"{', '.join(f'{c:.1f}' for c in ceilings)})\n")
    ik_head = " ik_llama.cpp t/s | ratio |" if a.ik_bench else ""
    print(f"| model | test | minfer t/s | llama.cpp t/s | ratio |{ik_head} decode bandwidth (minfer / llama.cpp) |")
    print("| --- | --- | ---: | ---: | ---: |" + (" ---: | ---: |" if a.ik_bench else "") + " ---: |")
    for r in rows:
        bwc = f"{100 * r['minfer_bw_frac']:.0f}% / {100 * r['llama_bw_frac']:.0f}%" if "minfer_bw_frac" in r else ""
        ik = (f" {r['ik_ts']:.1f} | {r['ik_ratio']:.2f} |" if "ik_ts" in r else " | |") if a.ik_bench else ""
        print(f"| {r['model']} | {r['test']} | {r['minfer_ts']:.1f} | {r['llama_ts']:.1f} | {r['ratio']:.2f} |{ik} {bwc} |")
    mem_rows = []
    for label, _ in models:
        if (label, "", "budget") not in memory:
            continue
        row = {"model": label, "budget": statistics.median(memory[(label, "", "budget")])}
        for engine in ("minfer", "llama.cpp"):
            for k in ("rss", "peak", "load"):
                if (label, engine, k) in memory:
                    row[f"{engine}_{k}"] = statistics.median(memory[(label, engine, k)])
        mem_rows.append(row)
    if mem_rows:
        mib = 1024 * 1024
        print(f"\nresident memory while decoding (after tg{a.n}) and peak, medians; x = / (model file + KV cache)\n")
        print("| model | file + KV MiB | minfer RSS | minfer peak | llama.cpp RSS | llama.cpp peak | load s (minfer / llama.cpp) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in mem_rows:
            cells = []
            for k in ("minfer_rss", "minfer_peak", "llama.cpp_rss", "llama.cpp_peak"):
                cells.append(f"{r[k] / mib:.1f} (x{r[k] / r['budget']:.2f})" if k in r else "")
            load = (f"{r['minfer_load']:.2f} / {r['llama.cpp_load']:.2f}"
                    if "minfer_load" in r and "llama.cpp_load" in r else "")
            print(f"| {r['model']} | {r['budget'] / mib:.1f} | " + " | ".join(cells) + f" | {load} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "isa": a.isa, "engines": engines, "kv_type": a.kv_type, "depths": depths, "ceiling_gbps": ceiling, "ceilings_gbps": ceilings, "rows": rows, "memory": mem_rows,
                       "samples": {"|".join(k): v for k, v in samples.items()}, "time": time.time()}, f, indent=1)


if __name__ == "__main__":
    main()
