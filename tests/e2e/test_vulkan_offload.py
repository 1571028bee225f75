"""-ngl / --device on the Vulkan backend, end to end on lavapipe (scripts/setup.sh installs it):
SmolLM2, Gemma 3 270M and random-weight models of every dense family give the CPU backend's
logits and greedy tokens with every layer on the device and with part of them (a split at a
layer boundary, the KV caches of the offloaded layers on the device); bench's per-token costs;
the flags' errors and warnings as llama.cpp's users expect them. lavapipe timings are never
speed claims."""
import os
import subprocess

import numpy as np
import pytest

MINFER = os.environ.get("MINFER_BIN", "")
MAKE_MODEL = os.environ.get("MINFER_MAKE_MODEL", "")
SMOLLM2 = os.environ.get("MINFER_SMOLLM2", "")
GEMMA3 = os.environ.get("MINFER_GEMMA3", "")
DEV = ["--device", "Vulkan0"]


def run(*args, timeout=600):
    assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
    return subprocess.run([MINFER, *args], capture_output=True, text=True, timeout=timeout)


def greedy(model, tokens, n, *extra, out=None):
    args = ["logits", model, "--tokens", tokens, "--greedy", str(n), *extra]
    if out:
        args += ["--out", out]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


FAMILIES = {
    "llama": [],
    "qwen2": [],
    "qwen3": [],
    "phi3": ["--head-dim", "32"],  # its fused attn_qkv: n_head x head dim = n_embd
    "gemma2": ["--head-dim", "64", "--swa", "8", "--swa-pattern", "2", "--attn-softcap", "50", "--final-softcap", "30", "--tied"],
    "gemma3": ["--head-dim", "64", "--swa", "8", "--swa-pattern", "2", "--tied"],
    # MoE: the experts' matmul_id and the routing (top_k, moe_weights, moe_sum) on the device
    "qwen3moe": ["--head-dim", "64", "--n-expert", "4", "--n-expert-used", "2", "--n-ff-exp", "128"],
}


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_random_families_equal_the_cpu(arch, tmp_path):
    """Random weights quantized to Q8_0 (the quantized types' dot products are the CPU's bit for
    bit; F16/F32 weights are summed in another order by the CPU's float GEMMs): logits
    bit-identical (gemma2: its soft-caps' tanh against libm's tanhf, NMSE < 1e-12), the same 16
    greedy tokens with every layer and with 2 of the 4 on the device."""
    assert os.path.isfile(MAKE_MODEL) and os.path.isfile(SMOLLM2)
    f16 = str(tmp_path / f"{arch}-f16.gguf")
    r = subprocess.run([MAKE_MODEL, "--vocab-from", SMOLLM2, "--out", f16, "--arch", arch, "--n-embd", "128",
                        "--n-layer", "4", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "256", "--type", "F16",
                        *(FAMILIES[arch] or ["--head-dim", "64"])], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    path = str(tmp_path / f"{arch}.gguf")
    r = run("quantize", f16, path, "Q8_0")
    assert r.returncode == 0, r.stderr
    tokens = ",".join(str(t) for t in range(1, 13))
    cpu = greedy(path, tokens, 16, out=str(tmp_path / "cpu.f32"))
    assert greedy(path, tokens, 16, "-ngl", "all", *DEV, out=str(tmp_path / "vk.f32")) == cpu
    assert greedy(path, tokens, 16, "-ngl", "2", *DEV) == cpu
    a = np.fromfile(tmp_path / "cpu.f32", dtype=np.float32)
    b = np.fromfile(tmp_path / "vk.f32", dtype=np.float32)
    nmse = float(np.sum((a - b) ** 2) / np.sum(a ** 2))
    print(f"{arch}: greedy 16 equal, logits {'bit-identical' if (a == b).all() else f'NMSE {nmse:.3g}'}")
    if arch == "gemma2":
        assert nmse < 1e-12, nmse
    else:
        assert (a == b).all(), nmse


def test_smollm2_logits_and_32_greedy_tokens_equal_the_cpu(tmp_path):
    """SmolLM2 Q4_1 on lavapipe: the shaders take the CPU's arithmetic (integer dot products in its
    float order, its activation and cache roundings, its attention steps, libm's RoPE angles, exact
    fused multiply-adds through doubles), so every prompt row's logits are the CPU's bits and the
    32 greedy tokens the same, with every layer and with 10 of 30 on the device."""
    tokens = "1,504,3458,282,4649,314,1883,30,198"
    cpu = greedy(SMOLLM2, tokens, 32, out=str(tmp_path / "cpu.f32"))
    assert greedy(SMOLLM2, tokens, 32, "-ngl", "all", *DEV, out=str(tmp_path / "vk.f32")) == cpu
    assert greedy(SMOLLM2, tokens, 32, "-ngl", "10", *DEV) == cpu
    a = np.fromfile(tmp_path / "cpu.f32", dtype=np.float32)
    b = np.fromfile(tmp_path / "vk.f32", dtype=np.float32)
    print(f"SmolLM2: 32 greedy tokens equal; prompt logits bit-identical: {bool((a == b).all())}")
    assert (a == b).all(), float(np.sum((a - b) ** 2) / np.sum(a ** 2))
    # A q8_0 cache (its Hadamard rotation, q8_0 stores, integer attention scores) on the device.
    q8 = ["-ctk", "q8_0", "-ctv", "q8_0"]
    cpu = greedy(SMOLLM2, tokens, 8, *q8, out=str(tmp_path / "cpu-q8.f32"))
    assert greedy(SMOLLM2, tokens, 8, *q8, "-ngl", "all", *DEV, out=str(tmp_path / "vk-q8.f32")) == cpu
    a = np.fromfile(tmp_path / "cpu-q8.f32", dtype=np.float32)
    b = np.fromfile(tmp_path / "vk-q8.f32", dtype=np.float32)
    assert (a == b).all(), float(np.sum((a - b) ** 2) / np.sum(a ** 2))


def test_gemma3_270m_on_the_device(tmp_path):
    """Gemma 3 270M Q4_K_M: head size 256, sliding windows, and a 262144 x 640 tied LM head
    (178 MB, over lavapipe's 128 MiB storage buffer range: bound in row ranges). Its prompt
    logits are the CPU's bits and 16 greedy tokens the same."""
    tokens = "2,105,2364,107,818,5279,529,7001,563"
    cpu = greedy(GEMMA3, tokens, 16, out=str(tmp_path / "cpu.f32"))
    assert greedy(GEMMA3, tokens, 16, "-ngl", "all", *DEV, out=str(tmp_path / "vk.f32")) == cpu
    a = np.fromfile(tmp_path / "cpu.f32", dtype=np.float32)
    b = np.fromfile(tmp_path / "vk.f32", dtype=np.float32)
    print(f"Gemma 3 270M: 16 greedy tokens equal; prompt logits bit-identical: {bool((a == b).all())}")
    assert (a == b).all(), float(np.sum((a - b) ** 2) / np.sum(a ** 2))


def test_one_shot_names_where_the_layers_run():
    r = run(SMOLLM2, "-p", "hi", "-n", "2", "--temp", "0", "-ngl", "10", *DEV)
    assert r.returncode == 0, r.stderr
    assert "[offload] layers 20..29 on Vulkan0: " in r.stderr and "layers 0..19 on the CPU with the output" in r.stderr, r.stderr


def test_info_shows_the_placement_and_device_memory():
    r = run("info", SMOLLM2, "-ngl", "10", *DEV)
    assert r.returncode == 0, r.stderr
    assert "layers 20..29 on Vulkan0: weights " in r.stdout and "layers 0..19 and the output on the CPU" in r.stdout, r.stdout
    import json
    j = json.loads(run("info", SMOLLM2, "--json", "--no-vocab", "-ngl", "all", *DEV).stdout)
    dev = j["offload"]["devices"][0]
    assert dev["device"] == "Vulkan0" and dev["layers"] == "layers 0..29 and the output", j["offload"]
    assert 0 < dev["weights_bytes"] <= j["memory"]["weights_bytes"] and dev["kv_bytes"] == j["memory"]["kv_bytes"], j


def test_flag_errors_and_warnings():
    r = run(SMOLLM2, "-p", "hi", "-n", "1", "--device", "Vulkan9")
    assert r.returncode != 0 and "no device 'Vulkan9' here" in r.stderr and "Vulkan0" in r.stderr, r.stderr
    r = run(SMOLLM2, "-p", "hi", "-n", "1", "-ngl", "lots")
    assert r.returncode != 0 and "-ngl lots: give a number of layers" in r.stderr, r.stderr
    # No hardware GPU here: -ngl alone keeps the CPU and says how to use the software device.
    r = run(SMOLLM2, "-p", "hi", "-n", "1", "--temp", "0", "-ngl", "99")
    assert r.returncode == 0, r.stderr
    assert "-ngl 99: " in r.stderr and "software device: name it with --device" in r.stderr, r.stderr
    for cmd in (["bench", SMOLLM2, "-p", "8", "-n", "0", "-r", "1"], ["perplexity", SMOLLM2, "-f", "/dev/null"],
                ["serve", SMOLLM2], ["viz", SMOLLM2], ["logits", SMOLLM2, "--tokens", "1", "--greedy", "1"]):
        r = run(*cmd, "-dev", "Vulkan9")
        assert r.returncode != 0 and "no device 'Vulkan9' here" in r.stderr, (cmd, r.stderr)


def test_bench_reports_one_submission_and_the_logits_row_per_decode_token(tmp_path):
    import json
    path = str(tmp_path / "llama.gguf")
    r = subprocess.run([MAKE_MODEL, "--vocab-from", SMOLLM2, "--out", path, "--arch", "llama", "--n-embd", "128",
                        "--n-layer", "4", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "256", "--head-dim", "64",
                        "--type", "F16"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = run("bench", path, "-p", "16", "-n", "8", "-r", "2", "-ngl", "all", *DEV, "-o", "json")
    assert r.returncode == 0, r.stderr
    pp, tg = json.loads(r.stdout)
    n_vocab, n_embd = 49152, 128
    for t in (pp, tg):
        assert t["backend"] == "Vulkan" and t["devices"] == ["Vulkan0"], t
    # Decode: one submission; in, the token's embedding row (the input layer is on the CPU) and
    # a few position and cache-row ints; out, the logits row.
    assert tg["submissions_per_token"] == 1.0, tg
    # Recorded once and replayed: every step but the first after the prompt test, whose larger
    # batch grew the device's activation scratch (which drops the recorded buffers): 15 of 16.
    assert tg["replayed_submissions_per_token"] >= 15 / 16, tg
    # (and RoPE: the token's position read, its cos/sin table written: n_rot / 2 pairs of floats)
    n_rot = 64
    assert tg["device_to_host_bytes_per_token"] == n_vocab * 4 + 4, tg
    assert n_embd * 4 + n_rot * 4 <= tg["host_to_device_bytes_per_token"] < n_embd * 4 + n_rot * 4 + 64, tg
    assert tg["dispatches_per_token"] > 4 * 10, tg
    # A prompt: one submission for its 16 tokens, and only the last row's logits come back.
    assert pp["submissions_per_token"] == 1 / 16 and pp["device_to_host_bytes_per_token"] == n_vocab * 4 / 16 + 4, pp
    print(f"tiny llama: decode {tg['submissions_per_token']} submissions, {tg['dispatches_per_token']} dispatches, "
          f"{tg['host_device_bytes_per_token']} host<->device bytes per token")
