#!/usr/bin/env bash
# Runs the whole test suite: builds Release and the fuzz targets, then ctest (unit tests, kernel
# and format tests, oracle comparisons against gguf-py / llama.cpp, the ISA checks of tests/isa
# with the qemu runs, and a 45 s libFuzzer run per parser, 30 s for images), the ISA scan of the fuzz tree, then
# the server and thread tests again under ASan+UBSan and TSan builds (scripts/test-sanitizers.sh,
# which scans those trees too; MINFER_SKIP_SANITIZERS=1 skips them), and the ARM build under
# qemu-user (scripts/test-arm64.sh; MINFER_SKIP_ARM64=1 skips it). Needs scripts/setup.sh to
# have run once. Prints the wall time of each stage, then ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export MINFER_FUZZ_SECONDS=${MINFER_FUZZ_SECONDS:-45}
STAGES=()
stage_start() { STAGE_NAME=$1; STAGE_T0=$SECONDS; echo "[test] stage: $1" >&2; }
stage_end() { STAGES+=("$(printf '%-28s %5d s' "$STAGE_NAME" $((SECONDS - STAGE_T0)))"); }
print_stages() {
  echo "[test] wall time per stage:"
  for s in "${STAGES[@]}"; do echo "[test]   $s"; done
  echo "[test]   $(printf '%-28s %5d s' total "$SECONDS")"
}

stage_start "build release"
./scripts/build.sh || { echo "0 passed, 1 failed (build)"; exit 1; }
stage_end
stage_start "build fuzz"
if [ ! -f build-fuzz/build.ninja ]; then cmake --preset fuzz >/dev/null || exit 1; fi
cmake --build build-fuzz || { echo "0 passed, 1 failed (fuzz build)"; exit 1; }
stage_end

stage_start "ctest (release + fuzz runs)"
cd build
# A fresh build tree has no test timings, and ctest then starts tests in declaration order: the
# 5-minute oracle tests would begin last and run alone. tests/ctest-costs.txt (timings of the
# slow tests on the 2-core dev machine) lets it start them first.
mkdir -p Testing/Temporary
[ -f Testing/Temporary/CTestCostData.txt ] || cp ../tests/ctest-costs.txt Testing/Temporary/CTestCostData.txt
export MINFER_FUZZ_SUMMARY=$PWD/fuzz-summary.txt
rm -f "$MINFER_FUZZ_SUMMARY"
ctest --output-on-failure -j2 --timeout 1200 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
total=$(grep -Eo 'tests failed out of [0-9]+' ctest.log | grep -Eo '[0-9]+$' || echo 0)
failed=$(grep -Eo '[0-9]+ tests failed out of' ctest.log | grep -Eo '^[0-9]+' || echo 0)
[ "$total" -gt 0 ] || { echo "0 passed, 1 failed (no tests ran)"; exit 1; }
[ -f "$MINFER_FUZZ_SUMMARY" ] && cat "$MINFER_FUZZ_SUMMARY"
cd "$ROOT"
stage_end

# The fuzz tree is built by clang with its sanitizer runtimes linked in: the same rule holds.
stage_start "isa scan (fuzz tree)"
extra_passed=0
extra_failed=0
if python3 tests/isa/isa_scan.py build-fuzz > build/isa-scan-fuzz.log 2>&1; then
  extra_passed=$((extra_passed + 1))
else
  extra_failed=$((extra_failed + 1)); rc=1
fi
tail -20 build/isa-scan-fuzz.log
stage_end

san_passed=0
san_failed=0
if [ "${MINFER_SKIP_SANITIZERS:-0}" != 1 ]; then
  stage_start "sanitizers (asan + tsan)"
  ./scripts/test-sanitizers.sh 2>&1 | tee build/sanitizers.log
  san_rc=${PIPESTATUS[0]}
  line=$(grep -E '^sanitizers: [0-9]+ passed, [0-9]+ failed' build/sanitizers.log | tail -1)
  san_passed=$(echo "$line" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+' || echo 0)
  san_failed=$(echo "$line" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+' || echo 1)
  [ -n "$line" ] || san_failed=1
  [ "$san_rc" -eq 0 ] || [ "$san_failed" -gt 0 ] || san_failed=1
  [ "$san_failed" -eq 0 ] || rc=1
  stage_end
  while IFS= read -r l; do STAGES+=("  $l"); done < <(sed -n 's/^\[sanitizers\] time: //p' build/sanitizers.log)
fi
arm_passed=0
arm_failed=0
if [ "${MINFER_SKIP_ARM64:-0}" != 1 ]; then
  stage_start "arm64 (cross build, qemu)"
  ./scripts/test-arm64.sh 2>&1 | tee build/arm64.log
  arm_rc=${PIPESTATUS[0]}
  line=$(grep -E '^arm64: [0-9]+ passed, [0-9]+ failed' build/arm64.log | tail -1)
  arm_passed=$(echo "$line" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+' || echo 0)
  arm_failed=$(echo "$line" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+' || echo 1)
  [ -n "$line" ] || arm_failed=1
  [ "$arm_rc" -eq 0 ] || [ "$arm_failed" -gt 0 ] || arm_failed=1
  [ "$arm_failed" -eq 0 ] || rc=1
  stage_end
  while IFS= read -r l; do STAGES+=("  $l"); done < <(sed -n 's/^\[arm64\]   //p' build/arm64.log)
fi
print_stages
echo "$((total - failed + extra_passed + san_passed + arm_passed)) passed, $((failed + extra_failed + san_failed + arm_failed)) failed"
exit $rc
