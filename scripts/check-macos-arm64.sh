#!/usr/bin/env bash
# Compile-and-link check of the Apple Silicon path without a Mac: src/core, src/quant,
# src/graph and src/backends/cpu (every .cpp but the x86 kernel files: *-avx2, *-avx512, *-amx*)
# plus tests/arm64/macos-smoke.cpp, built for aarch64-macos by zig's clang (PyPI ziglang, which
# brings libc++ and the macOS SDK headers), Release flags as the CMake build uses them. fmt is
# used header-only (FMT_HEADER_ONLY, Debian's headers). Objects go to build-macos-arm64/;
# prints "macos-arm64: N passed, N failed" (compiled files + the link).
#   scripts/check-macos-arm64.sh [-j N]
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build-macos-arm64
JOBS=${2:-$(nproc)}
python3 -m ziglang version >/dev/null 2>&1 || python3 -m pip install -q --disable-pip-version-check ziglang==0.17.1 2>&1 \
  | grep -v "WARNING: Running pip as" || true
if ! python3 -m ziglang version >/dev/null 2>&1; then echo "macos-arm64: 0 passed, 1 failed (no ziglang)"; exit 1; fi

mkdir -p "$OUT/inc" "$OUT/obj"
ln -sfn /usr/include/fmt "$OUT/inc/fmt"  # only fmt from the host's headers, not glibc's
# The sources: each library's .cpp files, the CPU backend's without the x86 kernel files.
srcs=()
for d in core quant graph; do srcs+=(src/$d/*.cpp); done
for f in src/backends/cpu/*.cpp; do
  case $f in *-avx2.cpp|*-avx512.cpp|*-amx.cpp|*-amx-*.cpp|*/kernels-amx.cpp) continue ;; esac
  srcs+=("$f")
done
srcs+=(tests/arm64/macos-smoke.cpp)
export ROOT OUT
compile() {
  local obj=$OUT/obj/$(echo "$1" | tr / _).o
  python3 -m ziglang c++ -target aarch64-macos -std=c++20 -O2 -DNDEBUG -ffp-contract=off -DFMT_HEADER_ONLY \
    -Wall -Wno-unused-command-line-argument -I"$ROOT/src" -isystem "$OUT/inc" -c "$ROOT/$1" -o "$obj" 2> "$obj.log" \
    && echo "ok $1" || { echo "FAILED $1"; cat "$obj.log"; }
}
export -f compile
printf '%s\n' "${srcs[@]}" | xargs -P "$JOBS" -I{} bash -c 'compile {}' > "$OUT/compile.log"
passed=$(grep -c '^ok ' "$OUT/compile.log")
failed=$(grep -c '^FAILED ' "$OUT/compile.log")
if [ "$failed" -gt 0 ]; then
  cat "$OUT/compile.log" | grep -v '^ok ' | head -60
  echo "macos-arm64: $passed passed, $failed failed (compile)"
  exit 1
fi
if python3 -m ziglang c++ -target aarch64-macos "$OUT"/obj/*.o -o "$OUT/macos-smoke" 2> "$OUT/link.log" \
   && file "$OUT/macos-smoke" | grep -q "Mach-O 64-bit arm64"; then
  passed=$((passed + 1))
else
  cat "$OUT/link.log"; failed=$((failed + 1))
fi
echo "macos-arm64: $passed passed, $failed failed (${#srcs[@]} files compiled, linked $(file -b "$OUT/macos-smoke" 2>/dev/null | cut -d, -f1))"
[ "$failed" -eq 0 ]
