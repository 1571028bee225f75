"""End-to-end tests of `minfer bench` (llama-bench-like speed and memory report) on SmolLM2."""
import json
import os
import re
import statistics
import subprocess

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")


def run(*args):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing (scripts/setup.sh fetches it)"
    return subprocess.run([MINFER, "bench", *args], capture_output=True, text=True, timeout=600)


def bench_json(*args):
    r = run(MODEL, "-o", "json", "-t", "2", *args)
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


def test_memory_fields_describe_this_process():
    res = bench_json("-p", "16", "-n", "4", "-r", "1")
    f16 = res[-1]
    assert f16["model_file_bytes"] == os.path.getsize(MODEL)
    # The weights are resident while decoding: at least half the file, and no more than
    # twice file + KV (a leak or a second copy of the weights would show).
    assert f16["rss_bytes"] >= 0.5 * f16["model_file_bytes"]
    assert f16["rss_bytes"] <= 2 * (f16["model_file_bytes"] + f16["kv_bytes"])
    assert f16["peak_rss_bytes"] >= f16["rss_bytes"]
    # The KV cache scales with its element size: f32 doubles it.
    f32 = bench_json("-p", "16", "-n", "4", "-r", "1", "--kv-type", "f32")[-1]
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
