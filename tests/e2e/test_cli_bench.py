"""End-to-end tests of `minfer bench` (llama-bench-like speed and memory report) on SmolLM2, and of
the KV memory `info` reports against what a Gemma 3 context really allocates."""
import json
import os
import re
import shutil
import statistics
import subprocess

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")
GEMMA3 = os.environ.get("MINFER_GEMMA3", "")


def run(*args):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, "bench", *args], capture_output=True, text=True, timeout=600)


def bench_json(*args, model=MODEL):
    r = run(model, "-o", "json", "-t", "2", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_json_has_one_object_per_test_with_consistent_statistics():
    res = bench_json("-p", "16,32", "-n", "4", "-r", "3")
    assert [(r["n_prompt"], r["n_gen"]) for r in res] == [(16, 0), (32, 0), (0, 4)]
    for r in res:
        s = r["samples_ts"]
        assert len(s) == 3 and all(x > 0 for x in s)
        assert abs(r["avg_ts"] - statistics.mean(s)) <= 1e-9 * r["avg_ts"]
        assert abs(r["stddev_ts"] - statistics.stdev(s)) <= 1e-9 * max(r["stddev_ts"], 1)
        # -b 512 is capped by the context, which is the longest test (32 tokens).
        assert r["n_threads"] == 2 and r["n_batch"] == 32 and r["backend"] == "CPU"


def test_depth_runs_every_test_after_that_many_cached_tokens():
    # llama-bench's -d: each depth in turn, every test at it; the context holds depth + test.
    res = bench_json("-p", "8", "-n", "4", "-d", "0,200", "-r", "2")
    assert [(r["n_prompt"], r["n_gen"], r["n_depth"]) for r in res] == [(8, 0, 0), (0, 4, 0), (8, 0, 200), (0, 4, 200)]
    one = bench_json("-p", "8", "-n", "4", "-r", "1")
    assert res[0]["kv_bytes"] * 8 == one[0]["kv_bytes"] * 208
    assert all(len(r["samples_ts"]) == 2 and min(r["samples_ts"]) > 0 for r in res)
    md = run(MODEL, "-p", "8", "-n", "4", "-d", "64", "-r", "1", "-t", "2")
    assert md.returncode == 0, md.stderr
    assert "| pp8 @ d64 |" in md.stdout and "| tg4 @ d64 |" in md.stdout, md.stdout
    bad = run(MODEL, "-d", "8192", "-p", "8", "-n", "0")  # SmolLM2 was trained on 8192 tokens
    assert bad.returncode == 1 and "exceeds the model's context of 8192" in bad.stderr, bad.stderr


def test_parallel_sequences_decode_together_and_report_the_step_cost():
    # --parallel N: N sequences, each test's tokens for every one of them; t/s is the aggregate
    # rate and step_ms the mean time of one forward pass (a tg step decodes N tokens).
    one = bench_json("-p", "16", "-n", "4", "-r", "2")
    four = bench_json("-p", "16", "-n", "4", "-r", "2", "--parallel", "4")
    assert [r["n_parallel"] for r in one] == [1, 1] and [r["n_parallel"] for r in four] == [4, 4]
    assert four[0]["kv_bytes"] == 4 * one[0]["kv_bytes"]
    for r in four:
        n = r["n_prompt"] or r["n_gen"]
        # pp: 4 x 16 tokens in passes of at most n_batch; tg: one pass per step.
        passes = -(-4 * n // r["n_batch"]) if r["n_prompt"] else n
        seconds = sum(4 * n / x for x in r["samples_ts"])
        assert abs(r["step_ms"] - 1000 * seconds / (passes * 2)) <= 1e-6 * r["step_ms"], r
    md = run(MODEL, "-p", "0", "-n", "4", "-r", "1", "-t", "2", "-np", "2")
    assert md.returncode == 0, md.stderr
    assert "| tg4 x2 |" in md.stdout, md.stdout
    bad = run(MODEL, "-n", "4", "--parallel", "0")
    assert bad.returncode != 0 and "parallel" in bad.stderr, bad.stderr


def test_memory_fields_describe_this_process(tmp_path):
    # A private copy of the file: the repack hands the source pages back to the kernel, which
    # keeps those another process maps too (a server test on the same SmolLM2 file, run beside
    # this one), and they would count as a second copy here.
    model = tmp_path / "model.gguf"
    shutil.copyfile(MODEL, model)
    res = bench_json("-p", "16", "-n", "4", "-r", "1", model=str(model))
    f16 = res[-1]
    assert f16["model_file_bytes"] == os.path.getsize(model)
    # The weights are resident while decoding: at least half the file, and no more than
    # twice file + KV (a leak or a second copy of the weights would show).
    assert f16["rss_bytes"] >= 0.5 * f16["model_file_bytes"]
    assert f16["rss_bytes"] <= 2 * (f16["model_file_bytes"] + f16["kv_bytes"])
    assert f16["peak_rss_bytes"] >= f16["rss_bytes"]
    # The KV cache scales with its element size: f32 doubles it.
    f32 = bench_json("-p", "16", "-n", "4", "-r", "1", "--kv-type", "f32", model=str(model))[-1]
    assert f16["kv_bytes"] > 0 and f32["kv_bytes"] == 2 * f16["kv_bytes"]


def test_markdown_table_and_memory_line():
    r = run(MODEL, "-p", "16", "-n", "4", "-r", "2", "-t", "2")
    assert r.returncode == 0, r.stderr
    rows = [l for l in r.stdout.splitlines() if l.startswith("| llama")]
    assert len(rows) == 2 and "| pp16 |" in rows[0] and "| tg4 |" in rows[1]
    assert re.search(r"\| [0-9.]+ ± [0-9.]+ \|$", rows[0])
    m = re.search(r"resident memory after the last test ([0-9.]+) MiB \(peak ([0-9.]+) MiB\); model file ([0-9.]+) MiB "
                  r"\+ KV cache ([0-9.]+) MiB \(x([0-9.]+), peak x([0-9.]+)\)", r.stdout)
    assert m, r.stdout
    rss, peak, file_mib = float(m[1]), float(m[2]), float(m[3])
    assert peak >= rss > 0 and abs(file_mib - os.path.getsize(MODEL) / 2**20) < 0.1


def test_bad_arguments_are_errors():
    r = run(MODEL, "-p", "12x")
    assert r.returncode != 0 and "'12x' is not a token count" in r.stderr
    r = run(MODEL + ".missing", "-p", "16")
    assert r.returncode != 0 and r.stderr.strip()
    r = run(MODEL, "-p", "16", "-n", "4", "-o", "xml")
    assert r.returncode != 0


def test_info_reports_the_kv_memory_a_sliding_window_context_allocates():
    # Gemma 3 270M: 15 of 18 layers see a 512-token window. At 1100 positions with -b 512 their
    # cache is a ring of 512 + 512 rows; --swa-full gives every layer 1100. bench's kv_bytes is the
    # scheduler's persistent allocation of a real context of max(-p, -n) positions.
    assert os.path.isfile(GEMMA3), f"MINFER_GEMMA3={GEMMA3!r} is missing (scripts/setup.sh fetches it)"
    seen = {}
    for extra in ([], ["--swa-full"]):
        r = subprocess.run([MINFER, "info", GEMMA3, "--json", "-c", "1100", *extra], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        mem = json.loads(r.stdout)["memory"]
        b = subprocess.run([MINFER, "bench", GEMMA3, "-p", "1100", "-n", "0", "-r", "1", "-t", "2", "-o", "json", *extra],
                           capture_output=True, text=True, timeout=600)
        assert b.returncode == 0, b.stderr
        allocated = json.loads(b.stdout)[0]["kv_bytes"]
        assert mem["kv_bytes"] == allocated, (extra, mem, allocated)
        seen[bool(extra)] = mem
    ring, full = seen[False], seen[True]
    assert ring["kv_layers_swa"] == 15 and ring["kv_rows_swa"] == 1024 and ring["kv_layers_full"] == 3
    assert full["kv_layers_swa"] == 0 and full["kv_layers_full"] == 18 and full["kv_bytes_swa_layers"] == 0
    # per layer and row the same bytes: the ring layers hold 1024 of the 1100 rows
    row = full["kv_bytes"] // (18 * 1100)
    assert ring["kv_bytes"] == row * (3 * 1100 + 15 * 1024)
    text = subprocess.run([MINFER, "info", GEMMA3, "-c", "1100"], capture_output=True, text=True, timeout=120).stdout
    assert "their KV cache is a ring of 1024 rows" in text and "on 15 sliding-window layers (1024 rows)" in text


def test_quantized_kv_cache_types_in_bench_and_info():
    # --kv-type q8_0 / q4_0: llama-bench's type_k and type_v columns, the cache allocated at
    # 34 / 18 bytes per 32 values (f16: 64), and `info` giving the same bytes for every type.
    info = subprocess.run([MINFER, "info", MODEL, "--json", "--no-vocab", "-c", "64"], capture_output=True, text=True,
                          timeout=120)
    assert info.returncode == 0, info.stderr
    by_type = json.loads(info.stdout)["memory"]["kv_bytes_by_type"]
    assert set(by_type) == {"f32", "f16", "q8_0", "q4_0"}
    assert by_type["f32"] == 2 * by_type["f16"]
    assert by_type["q8_0"] * 64 == by_type["f16"] * 34 and by_type["q4_0"] * 64 == by_type["f16"] * 18
    for kv in ("q8_0", "q4_0"):
        r = run(MODEL, "-p", "64", "-n", "4", "-r", "1", "-t", "2", "--kv-type", kv)
        assert r.returncode == 0, r.stderr
        assert "| threads | type_k | type_v | test |" in r.stdout, r.stdout
        assert f"| 2 | {kv} | {kv} | pp64 |" in r.stdout, r.stdout
        j = json.loads(run(MODEL, "-p", "64", "-n", "0", "-r", "1", "-t", "2", "--kv-type", kv, "-o", "json").stdout)
        assert j[0]["type_kv"] == kv and j[0]["kv_bytes"] == by_type[kv], (j[0], by_type)
    text = subprocess.run([MINFER, "info", MODEL, "-c", "64"], capture_output=True, text=True, timeout=120).stdout
    assert re.search(r"KV per type +f32 [0-9.]+ [KM]iB, f16 [0-9.]+ [KM]iB, q8_0 [0-9.]+ [KM]iB, q4_0 [0-9.]+ [KM]iB", text), text
    # A type the cache cannot hold is refused by name.
    r = run(MODEL, "-p", "16", "--kv-type", "q5_1")
    assert r.returncode != 0 and "--kv-type q5_1: not supported yet; the KV cache types here are f16, f32, q8_0 and q4_0" in r.stderr, r.stderr
