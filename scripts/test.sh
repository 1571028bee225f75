#!/usr/bin/env bash
# Runs the whole test suite: builds Release and the fuzz targets, then ctest (unit tests, kernel
# and format tests, oracle comparisons against gguf-py / llama.cpp, and a 60 s libFuzzer run per
# parser), then the server and thread tests again under ASan+UBSan and TSan builds
# (scripts/test-sanitizers.sh; MINFER_SKIP_SANITIZERS=1 skips them). Needs scripts/setup.sh to
# have run once. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
export MINFER_FUZZ_SECONDS=${MINFER_FUZZ_SECONDS:-60}
./scripts/build.sh || { echo "0 passed, 1 failed (build)"; exit 1; }
if [ ! -f build-fuzz/build.ninja ]; then cmake --preset fuzz >/dev/null || exit 1; fi
cmake --build build-fuzz || { echo "0 passed, 1 failed (fuzz build)"; exit 1; }
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
san_passed=0
san_failed=0
if [ "${MINFER_SKIP_SANITIZERS:-0}" != 1 ]; then
  cd ..
  ./scripts/test-sanitizers.sh 2>&1 | tee build/sanitizers.log
  san_rc=${PIPESTATUS[0]}
  line=$(grep -E '^sanitizers: [0-9]+ passed, [0-9]+ failed' build/sanitizers.log | tail -1)
  san_passed=$(echo "$line" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+' || echo 0)
  san_failed=$(echo "$line" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+' || echo 1)
  [ -n "$line" ] || san_failed=1
  [ "$san_rc" -eq 0 ] || [ "$san_failed" -gt 0 ] || san_failed=1
  [ "$san_failed" -eq 0 ] || rc=1
fi
echo "$((total - failed + san_passed)) passed, $((failed + san_failed)) failed"
exit $rc
