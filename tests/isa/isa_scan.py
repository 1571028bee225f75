#!/usr/bin/env python3
"""Finds x86 ISA-extension code outside the kernel dispatch in built binaries.

    python3 tests/isa/isa_scan.py build build-asan      # every ELF executable under the trees
    python3 tests/isa/isa_scan.py build/bin/minfer      # one binary

Every function of a binary is disassembled (objdump -d) and each instruction classified by its
encoding: VEX (AVX, AVX2, FMA, F16C), EVEX or an opmask instruction (AVX-512), an AMX tile
instruction. A function may hold only what its table is chosen for, after cpuid said yes:
  - minfer::cpu::avx2 (its lambdas and anonymous-namespace helpers included): VEX;
  - minfer::cpu::avx512: VEX and EVEX;   minfer::cpu::amx: VEX, EVEX and AMX;
  - a GCC target_clones clone (name.avx2.0, picked by the ifunc resolver at load time): VEX;
  - every other function runs on every x86-64 CPU: none of them.
An offender would die with SIGILL on a CPU without the extension (or, in the AVX2 table, on an
AVX2-only CPU): the scan names the binary, the function and the first such instruction, and
exits 1. Ends with "isa-scan: N binaries, M functions with ISA code, K outside the dispatch".
The rule that keeps offenders out by construction: docs/recipes.md, "A CPU kernel".
"""
import bisect
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

VEX, EVEX, AMX = "VEX (AVX/AVX2/FMA/F16C)", "EVEX (AVX-512)", "AMX"
# The ISA namespaces of src/backends/cpu, one per kernel table, and what each may hold.
ISA_NAMESPACES = {"avx2": {VEX}, "avx512": {VEX, EVEX}, "amx": {VEX, EVEX, AMX}}
_ns = "|".join(f"{len(n)}({n})" for n in ISA_NAMESPACES)
# Mangled minfer::cpu::<isa>: plain and cv/ref-qualified members (_ZN, _ZNK, ...) and local
# entities such as lambdas and static locals (_ZZN...).
ISA_FUNCTION = re.compile(r"^_ZZ?N[KVrRO]*6minfer3cpu(?:%s)" % _ns)
TARGET_CLONE = re.compile(r"\.(avx2|fma|f16c|avx)(\.\d+)?$")

HEADER = re.compile(rb"^[0-9a-f]+ <([^>]+)>:$", re.M)
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


def allowed(name):
    base = name.split("@")[0]
    m = ISA_FUNCTION.match(base)
    if m:
        return ISA_NAMESPACES[next(g for g in m.groups() if g)]
    if TARGET_CLONE.search(base):
        return {VEX}
    return set()


def scan(path):
    """Returns (functions with ISA code, [(function, kind, instruction)] that may not hold it)."""
    out = subprocess.run(["objdump", "-d", "-w", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"objdump -d {path}: {out.stderr.decode(errors='replace').strip()}")
    text = out.stdout
    starts, names = [], []
    for m in HEADER.finditer(text):
        starts.append(m.start())
        names.append(m.group(1).decode(errors="replace"))
    with_isa, offenders, cache = set(), {}, {}
    for m in INSN.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i < 0:
            continue
        name = names[i]
        raw, insn = m.group(1).decode(), m.group(2).decode(errors="replace").strip()
        kind = classify(raw, insn)
        with_isa.add(name)
        if name not in cache:
            cache[name] = allowed(name)
        if kind not in cache[name] and name not in offenders:
            offenders[name] = (kind, insn)
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
            print(f"isa-scan: {path}: {nice.get(name, name)} [{name}] {where} but holds {kind} code: {insn}")
    print(f"isa-scan: {len(paths)} binaries, {n_isa} functions with ISA code, {n_bad} outside the dispatch")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
