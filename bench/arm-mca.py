#!/usr/bin/env python3
"""Static throughput of the ARM decode / prefill inner loops, ours beside llama.cpp's (issue 41).

No ARM hardware here, and qemu timings mean nothing, so this is a model, not a measurement:
each kernel file (ours: src/backends/cpu/*; llama.cpp: ggml/src/ggml-cpu/arch/arm/quants.c and
repack.cpp from .deps/llama.cpp, compiled in place into a temporary directory, nothing copied
or changed) is compiled to assembly by the same clang with the same flags
(--target=aarch64-linux-gnu -O2 -mcpu=CPU), the loops of each kernel function are found in the
assembly (LLVM's loop info, which clang -S writes beside every block; in llama.cpp's inline asm
a label and the branch back to it, its `.inst` words disassembled with llvm-mc first), and
llvm-mca (-mcpu=CPU -iterations=200) gives the cycles of
one iteration of each loop body in a steady state. A kernel's "unit" is one iteration of its
block loop (one block or super-block of the tile): its cycles are the llvm-mca cycles of the
unit loop's own instructions plus, for each loop nested in it, its trip count (read from the
source, listed in SPECS) times that loop's cycles. The int8 multiply-accumulates each unit does
are counted from the instructions (SDOT/UDOT 16, SMMLA 32, SMULL/SMLAL into .8h 8, times the
trip counts) and checked against the number read from the source (rows x elements x tokens of
the tile); the figures use the source's number (the instructions may add products that are not
weights x activations: Q4_K's mins by SMMLA). Decode: bytes of weights per cycle = elements of
weight per unit x the type's GGUF bytes per element / cycles per unit. Prefill: int8 MACs per
cycle = weights x tokens products per unit / cycles per unit.

What llvm-mca models: issue width, pipelines and latencies of its per-CPU scheduling model
(apple-m1: LLVM's Cyclone-family model; neoverse-v1: the Neoverse V1 model), loads always
hitting L1, and perfect branch prediction; it does not model the memory system, so a decode
loop's bytes per cycle is the core's ceiling for that loop with its data in L1, not a rate
from memory. Static throughput models, not measurements.

llama.cpp is built as it builds for these cores, but NEON only: on neoverse-v1 with +nosve
(llama.cpp built with SVE compiles only SVE loops for vec_dot Q4_0 / Q8_0 / Q4_K / Q6_K, and
minfer has none), on apple-m1 with +i8mm (M1 has no FEAT_I8MM; its model times SMMLA like
SDOT); the neon-table rows are compared with llama.cpp built for -march=armv8-a (its
ggml_vdotq_s32 fallback), ours built the same way.

Usage: python3 bench/arm-mca.py [--cpus apple-m1,neoverse-v1] [--clang clang++-19]
       [--mca llvm-mca-19] [--llama .deps/llama.cpp] [-v] [--markdown]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# GGUF bytes per block / elements per block.
BPE = {"Q4_0": 18 / 32, "Q8_0": 34 / 32, "IQ4_NL": 18 / 32, "Q4_K": 144 / 256, "Q6_K": 210 / 256,
       "IQ4_XS": 136 / 256}

# Sources: key -> (path relative to ROOT or to the llama.cpp tree, language, owner).
OURS = "src/backends/cpu/"
LLAMA_ARM = "ggml/src/ggml-cpu/arch/arm/"
SOURCES = {
    "vd-neon-nodot": (OURS + "vec-dot-neon.cpp", "c++", "ours"),
    "vd-dotprod": (OURS + "vec-dot-dotprod.cpp", "c++", "ours"),
    "vdk-neon-nodot": (OURS + "vec-dot-kquant-neon.cpp", "c++", "ours"),
    "vdk-dotprod": (OURS + "vec-dot-kquant-dotprod.cpp", "c++", "ours"),
    "gemm-dotprod": (OURS + "gemm-dotprod.cpp", "c++", "ours"),
    "gemmk-dotprod": (OURS + "gemm-kquant-dotprod.cpp", "c++", "ours"),
    "gemm-i8mm": (OURS + "gemm-i8mm.cpp", "c++", "ours"),
    "gemmk-i8mm": (OURS + "gemm-kquant-i8mm.cpp", "c++", "ours"),
    "ll-quants": (LLAMA_ARM + "quants.c", "c", "llama"),
    # the same file without FEAT_DotProd: ggml_vdotq_s32 becomes SMULL/SMULL2 + pairwise adds,
    # llama.cpp's build for ARMv8.0 cores, the counterpart of our neon table
    "ll-quants-nodot": (LLAMA_ARM + "quants.c", "c", "llama"),
    "ll-repack": (LLAMA_ARM + "repack.cpp", "c++", "llama"),
}


def S(type_, role, loop, src, func, mac, macs, tokens=1, up=0, trips=(), aux=1.0, note=""):
    """One kernel loop.
    func: regex on the demangled function name. mac: the int8 multiply-accumulate instruction
    that marks the loops of the product chain (sdot, smmla, smull: SMULL/SMLAL into .8h).
    The innermost loop holding `mac` is found; `up` loops outward from it is the unit loop (one
    block / super-block per iteration); trips[i]: iterations of the product-chain loop i levels
    below the unit loop per unit iteration (source); aux: iterations per enclosing iteration of
    any other loop nested in the unit (prefetch-line loops). macs: weight x activation products
    per unit (source: rows x elements x tokens); tokens: activation rows of the tile."""
    return dict(type=type_, role=role, loop=loop, src=src, func=func, mac=mac, macs=macs,
                tokens=tokens, up=up, trips=list(trips), aux=aux, note=note)


# Prefetch loops of our decode K-quant tiles (gemm-tiles.h prefetch_part): the block's repacked
# bytes (repack.h repack_block_bytes) in 64-byte lines spread over kSubs parts, one part per
# sub-block: two loops per sub-block pair (one per parity), bytes / 64 / kSubs lines each.
def _pf(bytes_, subs):
    return bytes_ / 64 / subs


SPECS = [
    # ---- decode ---------------------------------------------------------------------------
    # ours, neon table (no SDOT): the row kernels, vec-dot-neon.cpp / vec-dot-kquant-neon.cpp.
    S("Q4_0", "decode", "ours neon vec_dot", "vd-neon-nodot", r"neon::vec_dot_q4_0\(", "smull", 4 * 32,
      note="q4_0 main loop: 4 blocks per iteration (dot_blocks4, ib += 4)"),
    S("Q8_0", "decode", "ours neon vec_dot", "vd-neon-nodot", r"neon::vec_dot_q8_0\(", "smull", 4 * 32,
      note="4 blocks per iteration"),
    S("IQ4_NL", "decode", "ours neon vec_dot", "vd-neon-nodot", r"neon::vec_dot_iq4_nl\(", "smull", 4 * 32,
      note="4 blocks per iteration"),
    S("Q4_K", "decode", "ours neon vec_dot", "vdk-neon-nodot", r"neon::vec_dot_q4_k\(", "smull", 256,
      up=2, trips=(2, 2), note="super-block loop; half < 2, k < 2 loops kept by clang"),
    S("Q6_K", "decode", "ours neon vec_dot", "vdk-neon-nodot", r"neon::vec_dot_q6_k\(", "smull", 256,
      up=1, trips=(2,), note="super-block loop; h < 2 loop kept"),
    S("IQ4_XS", "decode", "ours neon vec_dot", "vdk-neon-nodot", r"neon::vec_dot_iq4_xs\(", "smull", 256,
      note="super-block loop, unrolled"),
    # ours, dotprod table: the GEMM's decode tile (4 quads = the 16-row group x 1 token), as
    # decode runs for every type with a repacked layout.
    S("Q4_0", "decode", "ours dotprod gemm 16x1", "gemm-dotprod", r"tile<.*Q4_0W, minfer::BlockQ8_0, 4, 1, false>",
      "sdot", 16 * 32, note="one repacked block: 16 rows x 32"),
    S("Q8_0", "decode", "ours dotprod gemm 16x1", "gemm-dotprod", r"tile<.*Q8_0W, minfer::BlockQ8_0, 4, 1, false>",
      "sdot", 16 * 32),
    S("IQ4_NL", "decode", "ours dotprod gemm 16x1", "gemm-dotprod", r"tile<.*IQ4_NLW, minfer::BlockQ8_0, 4, 1, false>",
      "sdot", 16 * 32),
    S("Q4_K", "decode", "ours dotprod gemm 16x1", "gemmk-dotprod", r"tile<.*Q4K, 4, 1>", "sdot", 16 * 256,
      up=1, trips=(4,), aux=_pf(2368, 8), note="super-block; sub-block pairs j < 8 step 2"),
    S("Q6_K", "decode", "ours dotprod gemm 16x1", "gemmk-dotprod", r"tile<.*Q6K, 4, 1>", "sdot", 16 * 256,
      up=1, trips=(8,), aux=_pf(3360, 16), note="super-block; 16-element sub-block pairs j < 16 step 2"),
    S("IQ4_XS", "decode", "ours dotprod gemm 16x1", "gemmk-dotprod", r"tile<.*IQ4XS, 4, 1>", "sdot", 16 * 256,
      up=1, trips=(4,), aux=_pf(2208, 8), note="super-block; sub-block pairs"),
    # ours, dotprod row kernels (the dotprod table's vec_dot: used without repacking)
    S("Q4_0", "decode", "ours dotprod vec_dot", "vd-dotprod", r"dotprod::vec_dot_q4_0\(", "sdot", 4 * 32),
    S("Q8_0", "decode", "ours dotprod vec_dot", "vd-dotprod", r"dotprod::vec_dot_q8_0\(", "sdot", 4 * 32),
    S("IQ4_NL", "decode", "ours dotprod vec_dot", "vd-dotprod", r"dotprod::vec_dot_iq4_nl\(", "sdot", 4 * 32),
    S("Q4_K", "decode", "ours dotprod vec_dot", "vdk-dotprod", r"dotprod::vec_dot_q4_k\(", "sdot", 256),
    S("Q6_K", "decode", "ours dotprod vec_dot", "vdk-dotprod", r"dotprod::vec_dot_q6_k\(", "sdot", 256),
    S("IQ4_XS", "decode", "ours dotprod vec_dot", "vdk-dotprod", r"dotprod::vec_dot_iq4_xs\(", "sdot", 256),
    # llama.cpp vec_dot built without dotprod (the neon table's counterpart)
    S("Q4_0", "decode", "llama.cpp vec_dot nodot", "ll-quants-nodot", r"^ggml_vec_dot_q4_0_q8_0$", "smull", 2 * 32),
    S("Q8_0", "decode", "llama.cpp vec_dot nodot", "ll-quants-nodot", r"^ggml_vec_dot_q8_0_q8_0$", "smull", 2 * 32),
    S("IQ4_NL", "decode", "llama.cpp vec_dot nodot", "ll-quants-nodot", r"^ggml_vec_dot_iq4_nl_q8_0$", "smull", 2 * 32),
    S("Q4_K", "decode", "llama.cpp vec_dot nodot", "ll-quants-nodot", r"^ggml_vec_dot_q4_K_q8_K$", "smull", 256,
      up=1, trips=(4,), note="super-block loop; j < QK_K / 64"),
    S("Q6_K", "decode", "llama.cpp vec_dot nodot", "ll-quants-nodot", r"^ggml_vec_dot_q6_K_q8_K$", "smull", 256,
      up=1, trips=(2,), note="super-block loop; j < QK_K / 128"),
    S("IQ4_XS", "decode", "llama.cpp vec_dot nodot", "ll-quants-nodot", r"^ggml_vec_dot_iq4_xs_q8_K$", "smull", 256,
      up=1, trips=(4,), note="super-block loop; ib < QK_K / 32, step 2"),
    # llama.cpp vec_dot (nrc == 1, NEON + dotprod path; 2 blocks per iteration for the
    # 32-element types, one super-block for the K-quants)
    S("Q4_0", "decode", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_q4_0_q8_0$", "sdot", 2 * 32),
    S("Q8_0", "decode", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_q8_0_q8_0$", "sdot", 2 * 32),
    S("IQ4_NL", "decode", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_iq4_nl_q8_0$", "sdot", 2 * 32),
    S("Q4_K", "decode", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_q4_K_q8_K$", "sdot", 256),
    S("Q6_K", "decode", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_q6_K_q8_K$", "sdot", 256),
    S("IQ4_XS", "decode", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_iq4_xs_q8_K$", "sdot", 256),
    # llama.cpp repacked decode (ggml_gemv_*: one interleaved block of 4 or 8 rows per iteration)
    S("Q4_0", "decode", "llama.cpp gemv 4x4", "ll-repack", r"^ggml_gemv_q4_0_4x4_q8_0$", "sdot", 4 * 32),
    S("Q8_0", "decode", "llama.cpp gemv 4x4", "ll-repack", r"^ggml_gemv_q8_0_4x4_q8_0$", "sdot", 4 * 32),
    S("IQ4_NL", "decode", "llama.cpp gemv 4x4", "ll-repack", r"^ggml_gemv_iq4_nl_4x4_q8_0$", "sdot", 4 * 32),
    S("Q4_K", "decode", "llama.cpp gemv 8x4", "ll-repack", r"^ggml_gemv_q4_K_8x4_q8_K$", "sdot", 8 * 256,
      up=1, trips=(4,), note="b loop; sb < QK_K / 64 kept"),
    S("Q6_K", "decode", "llama.cpp gemv 8x4", "ll-repack", r"^ggml_gemv_q6_K_8x4_q8_K$", "sdot", 8 * 256,
      up=2, trips=(2, 4), note="b loop; half < 2; sb < 4"),
    # ---- prefill ----------------------------------------------------------------------------
    S("Q4_0", "prefill", "ours dotprod gemm 4x8", "gemm-dotprod", r"tile<.*Q4_0W, minfer::BlockQ8_0, 1, 8, true>",
      "sdot", 4 * 32 * 8, tokens=8, note="one block of one quad x 8 tokens"),
    S("Q8_0", "prefill", "ours dotprod gemm 4x8", "gemm-dotprod", r"tile<.*Q8_0W, minfer::BlockQ8_0, 1, 8, true>",
      "sdot", 4 * 32 * 8, tokens=8),
    S("IQ4_NL", "prefill", "ours dotprod gemm 4x8", "gemm-dotprod", r"tile<.*IQ4_NLW, minfer::BlockQ8_0, 1, 8, true>",
      "sdot", 4 * 32 * 8, tokens=8),
    S("Q4_K", "prefill", "ours dotprod gemm 4x8", "gemmk-dotprod", r"tile<.*Q4K, 1, 8>", "sdot", 4 * 256 * 8,
      tokens=8, up=1, trips=(4,)),
    S("Q6_K", "prefill", "ours dotprod gemm 4x8", "gemmk-dotprod", r"tile<.*Q6K, 1, 8>", "sdot", 4 * 256 * 8,
      tokens=8, up=1, trips=(8,)),
    S("IQ4_XS", "prefill", "ours dotprod gemm 4x8", "gemmk-dotprod", r"tile<.*IQ4XS, 1, 8>", "sdot", 4 * 256 * 8,
      tokens=8, up=1, trips=(4,)),
    S("Q4_0", "prefill", "ours i8mm gemm 4x8", "gemm-i8mm", r"tile<.*Q4_0W, 4>", "smmla", 4 * 32 * 8, tokens=8,
      note="bi loop: one block of one quad x 8 tokens (XChunk fill of 16 blocks not counted)"),
    S("Q8_0", "prefill", "ours i8mm gemm 4x8", "gemm-i8mm", r"tile<.*Q8_0W, 4>", "smmla", 4 * 32 * 8, tokens=8),
    S("IQ4_NL", "prefill", "ours i8mm gemm 4x8", "gemm-i8mm", r"tile<.*IQ4_NLW, 4>", "smmla", 4 * 32 * 8, tokens=8),
    S("Q4_K", "prefill", "ours i8mm gemm 4x8", "gemmk-i8mm", r"tile<\(minfer::DType\)12, 4>", "smmla", 4 * 256 * 8,
      tokens=8, up=1, trips=(4,), note="bi loop; j < 8 step 2; + 16 SMMLA of the mins"),
    S("Q6_K", "prefill", "ours i8mm gemm 4x8", "gemmk-i8mm", r"tile<\(minfer::DType\)14, 4>", "smmla", 4 * 256 * 8,
      tokens=8, up=1, trips=(16,), note="bi loop; j < 16"),
    # llama.cpp's GEMMs (repack.cpp): 4x4 / 8x4 = SDOT, 4x8 / 8x8 = SMMLA; each does 4 tokens
    # (one interleaved Q8 row group) x 4 or 8 rows per block.
    S("Q4_0", "prefill", "llama.cpp gemm 4x4", "ll-repack", r"^ggml_gemm_q4_0_4x4_q8_0$", "sdot", 16 * 4 * 32,
      tokens=16, note="inline asm main loop: 16 tokens x 4 rows x one block"),
    S("Q8_0", "prefill", "llama.cpp gemm 4x4", "ll-repack", r"^ggml_gemm_q8_0_4x4_q8_0$", "sdot", 4 * 4 * 32,
      tokens=4),
    S("IQ4_NL", "prefill", "llama.cpp gemm 4x4", "ll-repack", r"^ggml_gemm_iq4_nl_4x4_q8_0$", "sdot", 4 * 4 * 32,
      tokens=4),
    S("Q4_K", "prefill", "llama.cpp gemm 8x4", "ll-repack", r"^ggml_gemm_q4_K_8x4_q8_K$", "sdot", 8 * 4 * 256,
      tokens=4, up=2, trips=(4, 8), aux=4, note="b loop; sb < 4; k < reads_per_sb = 8; row < 4 (aux)"),
    S("Q6_K", "prefill", "llama.cpp gemm 8x4", "ll-repack", r"^ggml_gemm_q6_K_8x4_q8_K$", "sdot", 8 * 4 * 256,
      tokens=4, up=3, trips=(2, 4, 4), note="b loop; half < 2; sb < 4; k < reads_per_sb = 4"),
    S("Q4_0", "prefill", "llama.cpp gemm 4x8", "ll-repack", r"^ggml_gemm_q4_0_4x8_q8_0$", "smmla", 16 * 4 * 32,
      tokens=16, note="inline asm main loop: 16 tokens x 4 rows x one block"),
    S("Q8_0", "prefill", "llama.cpp gemm 4x8", "ll-repack", r"^ggml_gemm_q8_0_4x8_q8_0$", "smmla", 4 * 4 * 32,
      tokens=4),
    S("Q4_K", "prefill", "llama.cpp gemm 8x8", "ll-repack", r"^ggml_gemm_q4_K_8x8_q8_K$", "smmla", 8 * 4 * 256,
      tokens=4, up=2, trips=(4, 4), note="b loop; sb < 4; cp < 4"),
    S("Q6_K", "prefill", "llama.cpp gemm 8x8", "ll-repack", r"^ggml_gemm_q6_K_8x8_q8_K$", "smmla", 8 * 4 * 256,
      tokens=4, up=3, trips=(2, 4, 4), note="b loop; half < 2; sb < 4; k < 4"),
    # llama.cpp has no repacked GEMM for IQ4_XS: its prefill is the row kernel per token
    S("IQ4_XS", "prefill", "llama.cpp vec_dot", "ll-quants", r"^ggml_vec_dot_iq4_xs_q8_K$", "sdot", 256),
]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout


def compile_asm(args, key, cpu, tmp):
    path, lang, owner = SOURCES[key]
    base = ROOT if owner == "ours" else args.llama
    src = os.path.join(base, path)
    out = os.path.join(tmp, f"{key}.{cpu}.s")
    cc = args.clang if lang == "c++" else args.clang.replace("clang++", "clang")
    # "-nodot": built for ARMv8.0 (no SDOT) tuned for cpu: our neon table and llama.cpp's
    # fallback (clang keeps __ARM_FEATURE_DOTPROD for -mcpu=apple-m1+nodotprod)
    arch = ["-march=armv8-a", f"-mtune={cpu}"] if key.endswith("-nodot") else [f"-mcpu={cpu}{args.cpu_suffix.get(cpu, '')}"]
    cmd = [cc, "--target=aarch64-linux-gnu", "-O2"] + arch + ["-S",
           "-o", out, "-w"]
    if owner == "ours":
        cmd += ["-std=c++20", "-I", os.path.join(ROOT, "src")]
    else:
        g = os.path.join(args.llama, "ggml")
        cmd += ["-std=c++17" if lang == "c++" else "-std=c11", "-I", g + "/include", "-I", g + "/src",
                "-I", g + "/src/ggml-cpu", "-D_GNU_SOURCE"]
    run(["nice"] + cmd + [src])
    return expand_inst(args, open(out).read().splitlines())


def expand_inst(args, lines):
    """`.inst 0x...` words (llama.cpp's inline asm spells SDOT/SMMLA that way) -> mnemonics."""
    words = [ln.split()[1] for ln in lines if re.match(r"^\s+\.inst\s+0x[0-9a-fA-F]+", ln)]
    if not words:
        return lines
    text = run([args.mc, "--disassemble", "-triple=aarch64", "-mattr=+dotprod,+i8mm,+fullfp16,+bf16,+sve"],
               input=" ".join(f"0x{(int(w, 16) >> (8 * k)) & 0xff:02x}" for w in words for k in range(4)) + "\n")
    dis = [ln for ln in text.splitlines() if ln.startswith("\t") and not ln.strip().startswith(".")]
    if len(dis) != len(words):
        sys.exit(f"llvm-mc: {len(words)} .inst words, {len(dis)} instructions")
    it = iter(dis)
    return [next(it) if re.match(r"^\s+\.inst\s+0x", ln) else ln for ln in lines]


def functions(lines):
    out, cur = {}, None
    for ln in lines:
        m = re.match(r"^([A-Za-z_][\w.$]*):", ln)
        if m and not m.group(1).startswith(".L"):
            cur = m.group(1)
            out[cur] = []
            continue
        if cur is not None:
            out[cur].append(ln)
        if ln.startswith(".Lfunc_end"):
            cur = None
    names = list(out)
    dem = run(["c++filt"], input="\n".join(names) + "\n").splitlines()
    return {d: out[n] for n, d in zip(names, dem)}


BRANCH = re.compile(r"^\s*(b(?:\.\w+)?|cbn?z|tbn?z)\s+(?:[^/]*,\s*)?([.\w$]+)\s*(//.*)?$")
BLOCK = re.compile(r"^(\.LBB\d+_\d+:|// %bb\.\d+:)")


def is_insn(ln):
    s = ln.strip()
    return bool(s) and ln[0] in " \t" and not s.startswith((".", "//", ";", "#"))


def loops(body):
    """The loops of one function as sets of line indices. Compiled code: LLVM's own loop info,
    which clang -S writes beside each block (`=>This Loop Header: Depth=2`, `Parent Loop BBx`,
    `in Loop: Header=BBx`), so a rotated loop whose blocks are not contiguous is still whole.
    Inline asm (llama.cpp's Q4_0 GEMMs): a label and a later branch back to it, the lines
    between."""
    starts = [i for i, ln in enumerate(body) if BLOCK.match(ln)]
    bounds = [0] + starts + [len(body)]
    parent, members = {}, {}
    for a, b in zip(bounds, bounds[1:]):
        if a == b:
            continue
        name = body[a].split(":")[0].lstrip("./% ").replace("LBB", "BB") if BLOCK.match(body[a]) else None
        comm = []
        j = a
        while j < b and (j == a or body[j].strip().startswith("//")):
            if "//" in body[j]:
                comm.append(body[j].split("//", 1)[1])
            j += 1
        header, inner = None, None
        chain = []
        for c in comm:
            m = re.search(r"Parent Loop (BB\d+_\d+) Depth=(\d+)", c)
            if m:
                chain.append(m.group(1))
            if re.search(r"=>\s*This (Inner )?Loop Header", c):
                header = name
            m = re.search(r"in Loop: Header=(BB\d+_\d+)", c)
            if m:
                inner = m.group(1)
        if header:
            parent[header] = chain[-1] if chain else None
            inner = header
        if inner:
            members.setdefault(inner, set()).update(range(a, b))
    # a loop's lines include its child loops' lines
    def anc(h):
        while h is not None:
            yield h
            h = parent.get(h)
    full = {h: set() for h in members}
    for h, lines in members.items():
        for x in anc(h):
            full.setdefault(x, set()).update(lines)
    res = [frozenset(v) for v in full.values() if v]
    # inline asm: branches back to a .Ltmp / numeric label
    labels = {}
    for i, ln in enumerate(body):
        m = re.match(r"^\s*(\.Ltmp\d+|\d+):", ln)
        if m:
            labels.setdefault(m.group(1), []).append(i)
        m = BRANCH.match(ln)
        if m:
            t = m.group(2)
            t = t[:-1] if re.fullmatch(r"\d+b", t) else t
            c = [j for j in labels.get(t, []) if j < i]
            if c:
                res.append(frozenset(range(c[-1], i + 1)))
    return sorted(set(res), key=lambda l: (min(l), -len(l)))


def macs_of(ln):
    s = ln.strip()
    m = re.match(r"([a-z0-9]+)\s+v\d+\.(\w+)", s)
    if not m:
        return 0
    op, arr = m.groups()
    if op in ("sdot", "udot", "usdot"):
        return 16 if arr == "4s" else 8
    if op in ("smmla", "ummla", "usmmla"):
        return 32
    if op in ("smull", "smull2", "smlal", "smlal2", "umull", "umull2", "umlal", "umlal2") and arr == "8h":
        return 8
    return 0


def mac_kind(ln, kind):
    s = ln.strip().split()
    if not s:
        return False
    op = s[0]
    if macs_of(ln) == 0:  # NEON registers only: llama.cpp's SVE loops (sdot z.s) are not compared
        return False
    if kind == "smull":
        return op.startswith(("smull", "smlal"))
    return op == kind


class Tree:
    def __init__(self, body):
        self.body = body
        self.loops = loops(body)
        # parent: the smallest loop strictly containing it
        self.parent = {}
        for lp in self.loops:
            cont = [o for o in self.loops if o != lp and lp <= o]
            self.parent[lp] = min(cont, key=len) if cont else None

    def children(self, lp):
        return [c for c in self.loops if self.parent[c] == lp]

    def own(self, lp):
        """Instruction lines of lp not inside a nested loop, in program order."""
        inner = set().union(*self.children(lp))
        return [self.body[i] for i in sorted(lp) if i not in inner and is_insn(self.body[i])]

    def has(self, lp, kind):
        return any(mac_kind(self.body[i], kind) for i in lp)

    def name(self, lp):
        return f"{min(lp)}-{max(lp)}"


def mca(args, cpu, insns, cache):
    text = "\n".join(insns) + "\n"
    key = (cpu, text)
    if key not in cache:
        out = run(["nice", args.mca, "-mtriple=aarch64", f"-mcpu={cpu}", f"-mattr={args.mca_attr}",
                   f"-iterations={args.iterations}"], input=text)
        total = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1))
        rthr = float(re.search(r"Block RThroughput:\s+([\d.]+)", out).group(1))
        cache[key] = (total / args.iterations, rthr)
    return cache[key]


def measure(args, spec, cpu, asm, cache, log):
    fns = functions(asm)
    cands = [n for n in fns if re.search(spec["func"], n)]
    if len(cands) != 1:
        sys.exit(f"{spec['func']}: {len(cands)} functions match in {spec['src']}: {cands[:4]}")
    tree = Tree(fns[cands[0]])
    kind = spec["mac"]
    mloops = [lp for lp in tree.loops if tree.has(lp, kind)]
    inner = [lp for lp in mloops if not any(o != lp and o <= lp for o in mloops)]
    if not inner:
        sys.exit(f"{cands[0]}: no loop with {kind}")
    # the innermost loop with the product instruction; several (a main loop and a tail): the
    # one with the most of them (ties: the longest)
    def weight(lp):
        return (sum(macs_of(tree.body[i]) for i in lp if mac_kind(tree.body[i], kind)), len(lp))
    lp = max(inner, key=weight)
    chain = [lp]
    for _ in range(spec["up"]):
        lp = tree.parent[lp]
        if lp is None:
            sys.exit(f"{cands[0]}: fewer than {spec['up']} loops around the innermost")
        chain.append(lp)
    unit = chain[-1]
    # trips per parent iteration: spec["trips"][d] for every loop with the product instruction
    # at depth d + 1 below the unit loop (siblings too: a loop clang split in two), aux for others
    trips = {}

    def cost(l, depth=0):
        own = tree.own(l)
        cyc, rthr = mca(args, cpu, own, cache)
        m = sum(macs_of(x) for x in own)
        for c in tree.children(l):
            n = spec["trips"][depth] if tree.has(c, kind) and depth < len(spec["trips"]) else spec["aux"]
            trips[c] = n
            cc, cm = cost(c, depth + 1)
            cyc += n * cc
            m += n * cm
        return cyc, m

    cyc, macs = cost(unit)
    if log:
        print(f"  {spec['type']:6} {spec['loop']:24} {cpu:11} {cands[0][:90]}", file=sys.stderr)
        for l in tree.loops:
            mark = "*" if l == unit else ("+" if l in chain else " ")
            print(f"     {mark} loop {tree.name(l)} ({len(l)} lines) own {len(tree.own(l))} insns, "
                  f"{sum(macs_of(x) for x in tree.own(l))} MACs own, trips {trips.get(l, '-')}", file=sys.stderr)
        print(f"     unit: {cyc:.1f} cycles, {macs} MACs by instructions, {spec['macs']} from the source",
              file=sys.stderr)
    return cyc, macs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpus", default="apple-m1,neoverse-v1")
    ap.add_argument("--clang", default="clang++-19")
    ap.add_argument("--mca", default="llvm-mca-19")
    ap.add_argument("--mc", default="llvm-mc-19")
    ap.add_argument("--llama", default=os.path.join(ROOT, ".deps/llama.cpp"))
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--types", default="")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    # apple-m1 has no FEAT_I8MM (M2 and later do): +i8mm for the SMMLA kernels, the same for
    # both code bases; llvm-mca is told the same. neoverse-v1 without SVE: llama.cpp built with
    # SVE compiles only its SVE vec_dot loops for Q4_0 / Q8_0 / Q4_K / Q6_K (#if
    # __ARM_FEATURE_SVE ... #elif __ARM_NEON), and minfer has no SVE code: NEON against NEON, the
    # V1 scheduling model either way.
    args.cpu_suffix = {"apple-m1": "+i8mm", "neoverse-v1": "+nosve"}
    args.mca_attr = "+dotprod,+i8mm"
    for tool in (args.clang, args.mca, args.mc):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (Debian: apt-get install clang-19 llvm-19)")
    cpus = args.cpus.split(",")
    specs = [s for s in SPECS if not args.types or s["type"] in args.types.split(",")]
    cache, res, bad = {}, {}, []
    with tempfile.TemporaryDirectory(prefix="arm-mca-") as tmp:
        for cpu in cpus:
            asm = {}
            for s in specs:
                if s["src"] not in asm:
                    asm[s["src"]] = compile_asm(args, s["src"], cpu, tmp)
                cyc, macs = measure(args, s, cpu, asm[s["src"]], cache, args.verbose)
                if macs < s["macs"]:
                    bad.append(f"{s['type']} {s['loop']} {cpu}: {macs} MACs in the instructions < {s['macs']}")
                res[(s["type"], s["role"], s["loop"], cpu)] = (cyc, macs)
    # table
    rows = []
    for role in ("decode", "prefill"):
        for t in dict.fromkeys(s["type"] for s in specs):
            group = [s for s in specs if s["type"] == t and s["role"] == role]
            # ours / llama.cpp's best loop of the same type, role and instruction set (neon:
            # llama.cpp built without dotprod; i8mm: its SMMLA GEMMs, or where it has none for
            # the type, its SDOT loops, the ratio then marked *); a row kernel (vec_dot) against
            # llama.cpp's row kernel, a GEMM against any of llama.cpp's loops
            def best(isa_, cpu, rows):
                return max((metric(s, res[(t, role, s["loop"], cpu)][0]) for s in group
                            if s["loop"].startswith("llama.cpp") and isa(s) == isa_
                            and (not rows or "vec_dot" in s["loop"])), default=None)
            for s in group:
                vals = [metric(s, res[(t, role, s["loop"], cpu)][0]) for cpu in cpus]
                ratios = []
                for v, c in zip(vals, cpus):
                    r, mark = best(isa(s), c, "vec_dot" in s["loop"]), ""
                    if r is None and isa(s) == "i8mm":
                        r, mark = best("dotprod", c, False), "*"
                    ratios.append("" if s["loop"].startswith("llama.cpp") or not r else f"{v / r:.2f}{mark}")
                cycs = [res[(t, role, s["loop"], cpu)][0] for cpu in cpus]
                rows.append((role, t, s["loop"], s["macs"] // s["tokens"] if role == "decode" else s["macs"],
                             cycs, vals, ratios))
    unit = {"decode": "B/cycle", "prefill": "MAC/cycle"}
    n = len(cpus)
    if not args.markdown:
        print(f"{'':7} {'':6} {'':24} {'per unit':>9} " + " ".join(f"{c[:11] + ' cyc':>9}" for c in cpus)
              + " " + " ".join(f"{c[:11]:>13}" for c in cpus) + " " + " ".join(f"{c[:8] + '/llama':>14}" for c in cpus))
    last = None
    for role, t, loop, per, cycs, vals, ratios in rows:
        peru = f"{per} el" if role == "decode" else f"{per} MAC"
        if args.markdown:
            if role != last:
                hdr = ["type", "loop", "unit"] + [f"{c} cycles/unit" for c in cpus] + \
                      [f"{c} {unit[role]}" for c in cpus] + [f"{c} ours / llama.cpp" for c in cpus]
                print(("\n" if last else "") + "| " + " | ".join(hdr) + " |")
                print("|" + " --- |" * len(hdr))
                last = role
            print("| " + " | ".join([t, loop, peru] + [f"{c:.1f}" for c in cycs] + [f"{v:.1f}" for v in vals]
                                    + ratios) + " |")
        else:
            print(f"{role:7} {t:6} {loop:24} {peru:>9} " + " ".join(f"{c:9.1f}" for c in cycs) + " "
                  + " ".join(f"{f'{v:.1f} {unit[role]}':>13}" for v in vals) + " "
                  + " ".join(f"{r:>14}" for r in ratios))
    if bad:
        print("\nCHECK (fewer products in the instructions than the source says):", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        sys.exit(1)


def isa(s):
    l = s["loop"]
    if "neon" in l or "nodot" in l:
        return "neon"
    if "i8mm" in l or (l.startswith("llama.cpp") and ("4x8" in l or "8x8" in l)):
        return "i8mm"
    return "dotprod"


def metric(s, cyc):
    if s["role"] == "decode":
        return s["macs"] / s["tokens"] * BPE[s["type"]] / cyc
    return s["macs"] / cyc


if __name__ == "__main__":
    main()
