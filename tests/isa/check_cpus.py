#!/usr/bin/env python3
"""Runs the Release binary on CPUs this machine is not, under qemu-user, and checks that every
one gives the native run's logits bit for bit (results never depend on the ISA).

    python3 tests/isa/check_cpus.py --bin build/bin --vocab SmolLM2-135M-Instruct-Q4_1.gguf \
        --work build/isa-cpus [--cpus Nehalem,Haswell]

  - Nehalem: SSE4.2, no AVX: the kernel table must be "ref", and no instruction outside it may
    need more (qemu stops the run with SIGILL where one does);
  - Haswell: AVX2, FMA, F16C, no AVX-512: the "avx2" table.
Small random-weight models in real shapes (minfer-make-test-model, then minfer quantize) cover
the kernels of each type: llama in F16 (as Haswell only), Q4_0, Q4_1, Q8_0, Q4_K_M (Q4_K + Q6_K), IQ4_XS;
qwen3 (q/k norms) in Q5_K_M; gemma3 (sliding window, GELU, soft-capping) in Q8_0. Each runs a
24-token prompt (the batched GEMM tiles and tiled attention) and 6 greedy steps (the decode
kernels and the narrow attention) with `minfer logits -v`, whose [backend] line names the table.
Prints one line per model and CPU and ends with "isa-cpus: N passed, N failed".
"""
import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import time

EXPECTED_TABLE = {"Nehalem": "ref", "Haswell": "avx2"}
SHAPE = ["--n-embd", "256", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "512"]
# (name, architecture, extra make-test-model flags, quantize type or None for the F16 file).
# The F16 model runs as Haswell only (its F16C path): as Nehalem it is the scalar reference that
# MINFER_ISA=ref runs natively in the unit tests, and the slowest run under emulation (~45 s).
ONLY_ON = {"llama-f16": {"Haswell"}}
MODELS = [
    ("llama-f16", "llama", [], None),
    ("llama-q4_0", "llama", [], "Q4_0"),
    ("llama-q4_1", "llama", [], "Q4_1"),
    ("llama-q8_0", "llama", [], "Q8_0"),
    ("llama-q4_k_m", "llama", [], "Q4_K_M"),
    ("llama-iq4_xs", "llama", [], "IQ4_XS"),
    ("qwen3-q5_k_m", "qwen3", [], "Q5_K_M"),
    ("gemma3-q8_0", "gemma3", ["--tied", "--swa", "8", "--swa-pattern", "2", "--final-softcap", "30"], "Q8_0"),
]
TOKENS = ",".join(str((i * 7919) % 49000 + 10) for i in range(24))


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def make_models(bin_dir, vocab, work):
    os.makedirs(work, exist_ok=True)
    paths = {}
    for name, arch, extra, qtype in MODELS:
        base = os.path.join(work, f"{arch}-f16{'-' + '-'.join(extra) if extra else ''}.gguf".replace("--", ""))
        if not os.path.exists(base):
            r = run([os.path.join(bin_dir, "minfer-make-test-model"), "--arch", arch, "--vocab-from", vocab,
                     *SHAPE, *extra, "--type", "F16", "--out", base + ".tmp"])
            if r.returncode != 0:
                sys.exit(f"isa-cpus: minfer-make-test-model --arch {arch} failed: {r.stderr.strip()}")
            os.replace(base + ".tmp", base)
        path = base
        if qtype:
            path = os.path.join(work, f"{name}.gguf")
            if not os.path.exists(path):
                r = run([os.path.join(bin_dir, "minfer"), "quantize", base, path + ".tmp", qtype])
                if r.returncode != 0:
                    sys.exit(f"isa-cpus: minfer quantize {qtype} failed: {r.stderr.strip()}")
                os.replace(path + ".tmp", path)
        paths[name] = path
    return paths


def logits(minfer, model, out, qemu_cpu=None):
    cmd = [minfer, "logits", model, "--tokens", TOKENS, "--out", out, "--greedy", "6", "-t", "2", "-v"]
    if qemu_cpu:
        cmd = ["qemu-x86_64", "-cpu", qemu_cpu] + cmd
    t0 = time.time()
    r = run(cmd, timeout=600)
    table = re.search(r"^\[backend\] cpu: kernels (\w+)", r.stderr, re.M)
    greedy = re.search(r'\{"greedy": \[([^\]]*)\]\}', r.stdout)
    return {"rc": r.returncode, "table": table.group(1) if table else None,
            "greedy": greedy.group(1) if greedy else None, "seconds": time.time() - t0,
            "stderr": "\n".join(l for l in r.stderr.splitlines() if "TCG doesn't support" not in l)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="directory of minfer and minfer-make-test-model")
    ap.add_argument("--vocab", required=True, help="GGUF whose tokenizer the models copy (SmolLM2)")
    ap.add_argument("--work", required=True, help="directory for the models and logits files")
    ap.add_argument("--cpus", default="Nehalem,Haswell", help="qemu -cpu models, comma-separated")
    a = ap.parse_args()
    if not shutil.which("qemu-x86_64"):
        print("isa-cpus: qemu-x86_64 is not installed (Debian qemu-user; scripts/setup.sh installs it)")
        print("isa-cpus: 0 passed, 1 failed")
        return 1
    minfer = os.path.abspath(os.path.join(a.bin, "minfer"))
    models = make_models(a.bin, a.vocab, a.work)
    passed = failed = 0
    for name, path in models.items():
        native_out = os.path.join(a.work, f"{name}.native.f32")
        native = logits(minfer, path, native_out)
        if native["rc"] != 0 or native["greedy"] is None:
            failed += 1
            print(f"isa-cpus: FAIL {name} native: exit {native['rc']}\n{native['stderr'][-2000:]}")
            continue
        for cpu in a.cpus.split(","):
            if name in ONLY_ON and cpu not in ONLY_ON[name]:
                continue
            out = os.path.join(a.work, f"{name}.{cpu}.f32")
            got = logits(minfer, path, out, cpu)
            problems = []
            if got["rc"] != 0:
                problems.append(f"exit {got['rc']}" + (" (SIGILL: an instruction this CPU lacks)" if got["rc"] in (-4, 132) else ""))
            want = EXPECTED_TABLE.get(cpu)
            if want and got["table"] != want:
                problems.append(f"kernel table {got['table']!r}, expected {want!r}")
            if got["rc"] == 0 and not filecmp.cmp(native_out, out, shallow=False):
                problems.append("prompt logits differ from the native run")
            if got["rc"] == 0 and got["greedy"] != native["greedy"]:
                problems.append(f"greedy tokens [{got['greedy']}] vs native [{native['greedy']}]")
            line = (f"{name} on {cpu}: table {got['table']} (native {native['table']}), greedy [{got['greedy']}], "
                    f"{got['seconds']:.1f} s")
            if problems:
                failed += 1
                print(f"isa-cpus: FAIL {line}: {'; '.join(problems)}\n{got['stderr'][-2000:]}")
            else:
                passed += 1
                print(f"isa-cpus: PASS {line}, logits identical")
    print(f"isa-cpus: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
