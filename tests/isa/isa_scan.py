#!/usr/bin/env python3
"""Finds x86 ISA-extension code outside the kernel dispatch in built binaries.

    python3 tests/isa/isa_scan.py build build-asan      # every ELF executable under the trees
    python3 tests/isa/isa_scan.py build/bin/minfer      # one binary

Every function of a binary is disassembled (objdump -d) and each instruction classified:
VEX-encoded (AVX, AVX2, FMA, F16C), EVEX or opmask (AVX-512), AMX tile instructions, and the
legacy-encoded instructions past x86-64's SSE2 baseline (SSE3, SSSE3, SSE4.1/4.2, POPCNT,
LZCNT...). A function may hold only what its table is chosen for, after cpuid said yes:
  - minfer::cpu::avx2 (its lambdas and anonymous-namespace helpers included): VEX and SSE3+;
  - minfer::cpu::avx512: also EVEX;   minfer::cpu::amx: also AMX;
  - a GCC target_clones clone (name.avx2.0, picked by the ifunc resolver at load time): VEX, SSE3+;
  - every other function runs on every x86-64 CPU: none of them.
A direct call or jump from a function into one whose table it is not allowed (baseline code
calling avx2::f, the avx2 table calling avx512::g) is named too: the tables take kernels'
addresses, only a kernel of a wider table may call one of a narrower one. An offender would die
with SIGILL on a CPU without the extension (or, in the AVX2 table, on an AVX2-only CPU): the
scan names the binary, the function and the first such instruction, and exits 1. Ends with
"isa-scan: N binaries, M functions with ISA code, K outside the dispatch".
The rule that keeps offenders out by construction: docs/recipes.md, "A CPU kernel".
"""
import bisect
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

SSE4, VEX, EVEX, AMX = "SSE3-4.2/POPCNT", "VEX (AVX/AVX2/FMA/F16C)", "EVEX (AVX-512)", "AMX"
# The ISA namespaces of src/backends/cpu, one per kernel table, and what each may hold.
ISA_NAMESPACES = {"avx2": {SSE4, VEX}, "avx512": {SSE4, VEX, EVEX}, "amx": {SSE4, VEX, EVEX, AMX}}
_ns = "|".join(f"{len(n)}({n})" for n in ISA_NAMESPACES)
# Mangled minfer::cpu::<isa>: plain and cv/ref-qualified members (_ZN, _ZNK, ...) and local
# entities such as lambdas and static locals (_ZZN...).
ISA_FUNCTION = re.compile(r"^_Z(?:Z)*N[KVrRO]*6minfer3cpu(?:%s)" % _ns)
TARGET_CLONE = re.compile(r"\.(avx2|fma|f16c|avx)(\.\d+)?(\.\w+)*$")

HEADER = re.compile(rb"^[0-9a-f]+ <([^>]+)>:$", re.M)
# Legacy-encoded instructions past SSE2 (x86-64's baseline): SSE3, SSSE3, SSE4.1, SSE4.2,
# POPCNT, LZCNT, MOVBE. (tzcnt is left out: GCC emits it at baseline as rep bsf, which older
# CPUs run as bsf.)
SSE4_MNEMONICS = (
    "addsubpd|addsubps|haddpd|haddps|hsubpd|hsubps|lddqu|movddup|movshdup|movsldup"
    "|pabsb|pabsd|pabsw|palignr|phaddd|phaddsw|phaddw|phsubd|phsubsw|phsubw|pmaddubsw|pmulhrsw"
    "|pshufb|psignb|psignd|psignw"
    "|blendpd|blendps|blendvpd|blendvps|dppd|dpps|extractps|insertps|movntdqa|mpsadbw|packusdw"
    "|pblendvb|pblendw|pcmpeqq|pextrb|pextrd|pextrq|phminposuw|pinsrb|pinsrd|pinsrq|pmaxsb"
    "|pmaxsd|pmaxud|pmaxuw|pminsb|pminsd|pminud|pminuw|pmovsx\\w+|pmovzx\\w+|pmuldq|pmulld|ptest"
    "|roundpd|roundps|roundsd|roundss|crc32\\w*|pcmpestri|pcmpestrm|pcmpistri|pcmpistrm|pcmpgtq"
    "|popcnt|lzcnt|movbe")
LEGACY = re.compile(rb"^ +[0-9a-f]+:\t[0-9a-f ]+\t(?:" + SSE4_MNEMONICS.encode() + rb")\b([^\n]*)$", re.M)
CALL = re.compile(rb"^ +[0-9a-f]+:\t[0-9a-f ]+\t(?:call|jmp)q? +[0-9a-f]+ <([^>+]+)(?:\+0x[0-9a-f]+)?>", re.M)
# `objdump -d -w` instruction lines: "  addr:\tbytes \tmnemonic operands". Only lines whose
# encoding starts (after segment/address-size prefixes) with c4/c5 (VEX) or 62 (EVEX) can hold
# these extensions; the regex finds those, then classify() decides.
INSN = re.compile(rb"^ +[0-9a-f]+:\t((?:(?:2e|3e|26|36|64|65|67) )*(?:c4|c5|62) [^\t]*)\t([^\n]*)$", re.M)
OPMASK = re.compile(r"^k(add|and|andn|mov|not|or|ortest|shiftl|shiftr|test|unpck|xnor|xor)[bwdq]")
AMX_MNEMONIC = re.compile(r"^(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilerelease|tilezero|tdp\w+)$")


def classify(raw, text):
    first = [b for b in raw.split() if b not in ("2e", "3e", "26", "36", "64", "65", "67")][0]
    mnemonic = text.split()[0] if text.split() else ""
    if mnemonic.startswith("{"):  # {vex}/{evex} pseudo-prefix
        mnemonic = text.split()[1]
    if AMX_MNEMONIC.match(mnemonic):
        return AMX
    if first == "62" or OPMASK.match(mnemonic):
        return EVEX
    return VEX


def is_elf_executable(path):
    try:
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            return False
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def binaries(args):
    for a in args:
        if os.path.isdir(a):
            for root, dirs, files in os.walk(a):
                dirs[:] = sorted(d for d in dirs if d not in ("CMakeFiles", "Testing", "_deps"))
                for name in sorted(files):
                    p = os.path.join(root, name)
                    if is_elf_executable(p):
                        yield p
        elif is_elf_executable(a):
            yield a
        else:
            sys.exit(f"isa-scan: {a}: not an ELF executable or a directory")


# libFuzzer's runtime (compiler-rt, linked into the fuzz targets only) is built by LLVM with
# SSE4.2 and POPCNT; those binaries run on development and CI machines, never for users.
FUZZER_RUNTIME = re.compile(r"^(__sanitizer_cov_|_ZN6fuzzer|_ZNK6fuzzer)")


def allowed(name):
    base = name.split("@")[0]
    if FUZZER_RUNTIME.match(base):
        return {SSE4}
    m = ISA_FUNCTION.match(base)
    if m:
        return ISA_NAMESPACES[next(g for g in m.groups() if g)]
    if TARGET_CLONE.search(base):
        return {VEX}
    return set()


def objdump(path):
    # One retry: ctest runs the scan beside other tests, and a binary being relinked reads short.
    for attempt in range(2):
        out = subprocess.run(["objdump", "-d", "-w", path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, check=False)
        if out.returncode == 0:
            return out.stdout
        time.sleep(2)
    raise RuntimeError(f"objdump -d {path}: {out.stderr.decode(errors='replace').strip()}")


def scan(path):
    """Returns (functions with ISA code, [(function, kind, instruction)] that may not hold it)."""
    text = objdump(path)
    starts, names = [], []
    for m in HEADER.finditer(text):
        starts.append(m.start())
        names.append(m.group(1).decode(errors="replace"))
    with_isa, offenders, cache = set(), {}, {}

    def allow(name):
        if name not in cache:
            cache[name] = allowed(name)
        return cache[name]

    def owner(pos):
        i = bisect.bisect_right(starts, pos) - 1
        return names[i] if i >= 0 else None

    for m in INSN.finditer(text):
        name = owner(m.start())
        if name is None:
            continue
        raw, insn = m.group(1).decode(), m.group(2).decode(errors="replace").strip()
        if insn.startswith("(bad)"):  # bytes objdump cannot decode (data or padding in .text)
            continue
        kind = classify(raw, insn)
        with_isa.add(name)
        if kind not in allow(name) and name not in offenders:
            offenders[name] = (kind, insn)
    for m in LEGACY.finditer(text):
        name = owner(m.start())
        if name is None:
            continue
        with_isa.add(name)
        if SSE4 not in allow(name) and name not in offenders:
            offenders[name] = (SSE4, m.group(0).decode(errors="replace").split("\t")[-1].strip())
    for m in CALL.finditer(text):
        name = owner(m.start())
        target = m.group(1).decode(errors="replace")
        if name is None or target.split("@")[0] == name.split("@")[0] or not ISA_FUNCTION.match(target):
            continue
        wider = allow(target) - allow(name)
        if wider and name not in offenders:
            offenders[name] = ("a call into " + "/".join(sorted(wider)) + " code",
                               m.group(0).decode(errors="replace").split("\t")[-1].strip())
    return with_isa, sorted(offenders.items())


def demangle(names):
    if not names:
        return {}
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=False)
    lines = r.stdout.splitlines() if r.returncode == 0 else names
    return dict(zip(names, lines))


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    paths = list(binaries(argv))
    if not paths:
        sys.exit("isa-scan: no ELF executables under " + " ".join(argv))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(scan, paths))
    n_isa = n_bad = 0
    for path, (with_isa, offenders) in zip(paths, results):
        n_isa += len(with_isa)
        nice = demangle([n for n, _ in offenders])
        for name, (kind, insn) in offenders:
            n_bad += 1
            where = "runs on every CPU" if not allowed(name) else "is in a table that may not hold it"
            what = kind if kind.startswith("a call") else f"{kind} code"
            print(f"isa-scan: {path}: {nice.get(name, name)} [{name}] {where} but holds {what}: {insn}")
    print(f"isa-scan: {len(paths)} binaries, {n_isa} functions with ISA code, {n_bad} outside the dispatch")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
