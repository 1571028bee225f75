#!/usr/bin/env python3
"""Checks the ISA-region rule of src/backends/cpu (isa-begin.h) on the sources.

    python3 tests/isa/isa_regions.py [SOURCE_DIR]

  - a file that opens a region (#include "backends/cpu/isa-begin.h", after #define MINFER_ISA)
    includes nothing after that line but ISA headers, closes it with isa-end.h as its last
    include, and holds nothing in the region but `namespace minfer::cpu::<its isa> { ... }`
    (a declaration or definition elsewhere in the region would get the ISA too);
  - an ISA header (one that refuses to be included outside a region: `#ifndef MINFER_ISA_REGION`)
    includes only what isa-begin.h includes before opening the region, and other ISA headers,
    so no std header or other library's inline function is first parsed inside a region;
  - no source of the CPU backend passes ISA flags (-mavx2, target attributes, -march) except
    through a region, and no CMake file or preset of the project gives -m ISA flags.
Exits 1 naming each file and line that breaks a rule.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]')


def includes(path):
    with open(path) as f:
        return [(n, m.group(1)) for n, line in enumerate(f, 1) if (m := INCLUDE.match(line))]


ISA_FLAG = re.compile(r"(?<!no )-m(avx|fma|f16c|amx|arch=|tune=|bmi|sse[34]|ssse3|popcnt|lzcnt|pclmul|aes|gfni|vpclmul|movbe)")


def cmake_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build") and x != "node_modules"]
        for f in files:
            if f == "CMakeLists.txt" or f.endswith(".cmake") or f == "CMakePresets.json":
                yield os.path.join(d, f)


def outside_isa_namespace(code, isa):
    """What a region holds at file scope besides `namespace minfer::cpu::<isa> { ... }`."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", code, flags=re.S)
    code = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', code)
    code = "\n".join(l for l in code.split("\n") if not l.lstrip().startswith("#"))
    problems, depth, pending = [], 0, ""
    for ch in code:
        if depth == 0:
            if ch == "{":
                if not re.fullmatch(r"\s*namespace\s+minfer::cpu::%s\s*" % re.escape(isa), pending):
                    problems.append(f"`{' '.join(pending.split())[:80]} {{` outside namespace minfer::cpu::{isa}")
                pending = ""
                depth = 1
            elif ch == ";":
                problems.append(f"`{' '.join(pending.split())[:80]};` outside namespace minfer::cpu::{isa}")
                pending = ""
            else:
                pending += ch
        else:
            depth += (ch == "{") - (ch == "}")
    if pending.strip():
        problems.append(f"`{' '.join(pending.split())[:80]}` outside namespace minfer::cpu::{isa}")
    return problems


def main(argv):
    root = argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    cpu = os.path.join(root, "src", "backends", "cpu")
    begin = os.path.join(cpu, "isa-begin.h")
    allowed_outside = {inc for _, inc in includes(begin)}
    isa_headers = set()
    for name in os.listdir(cpu):
        if name.endswith(".h") and name != "isa-end.h" and \
                "#ifndef MINFER_ISA_REGION" in open(os.path.join(cpu, name)).read():
            isa_headers.add(f"backends/cpu/{name}")
    errors = []
    n_regions = 0
    for name in sorted(os.listdir(cpu)):
        path = os.path.join(cpu, name)
        text = open(path).read()
        incs = includes(path)
        rel = f"backends/cpu/{name}"
        if rel in isa_headers:
            for n, inc in incs:
                if inc not in allowed_outside and inc not in isa_headers:
                    errors.append(f"{path}:{n}: ISA header includes <{inc}>, which isa-begin.h does not include "
                                  "before the region: add it there, or include it before the region")
            continue
        if name.endswith(".cpp"):
            for n, line in enumerate(text.splitlines(), 1):
                if re.search(r"__attribute__\s*\(\(\s*target|\[\[gnu::target|#\s*pragma\s+GCC\s+target|pragma\s+clang\s+attribute", line):
                    errors.append(f"{path}:{n}: a target attribute or pragma outside isa-begin.h: open an ISA region instead")
        opened = [n for n, inc in incs if inc == "backends/cpu/isa-begin.h"]
        if not opened:
            for n, inc in incs:
                if inc in isa_headers:
                    errors.append(f"{path}:{n}: includes the ISA header {inc} outside an ISA region")
            continue
        n_regions += 1
        start = opened[0]
        if not re.search(r"^#define MINFER_ISA \w+$", text, re.M):
            errors.append(f"{path}: opens an ISA region without #define MINFER_ISA <isa>")
        isa = re.search(r"^#define MINFER_ISA (\w+)$", text, re.M)
        if isa:
            body = text.split("\n")[start:]
            for problem in outside_isa_namespace("\n".join(body), isa.group(1)):
                errors.append(f"{path}: in its ISA region: {problem}")
        after = [(n, inc) for n, inc in incs if n > start]
        if not after or after[-1][1] != "backends/cpu/isa-end.h":
            errors.append(f"{path}: the ISA region is not closed by a last #include \"backends/cpu/isa-end.h\"")
        for n, inc in after[:-1]:
            if inc not in isa_headers:
                errors.append(f"{path}:{n}: includes <{inc}> inside its ISA region: include it before "
                              "isa-begin.h (only ISA headers go inside)")
    for cmake in cmake_files(root):
        for n, line in enumerate(open(cmake), 1):
            if ISA_FLAG.search(line) and not line.lstrip().startswith("#"):
                errors.append(f"{cmake}:{n}: ISA flags for a whole file or target: use an ISA region (isa-begin.h)")
    for e in errors:
        print("isa-regions:", e)
    print(f"isa-regions: {n_regions} files with ISA regions, {len(isa_headers)} ISA headers, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
