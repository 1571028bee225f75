#!/usr/bin/env bash
# run-fuzz.sh FUZZ_BUILD_DIR TARGET [SECONDS, default $MINFER_FUZZ_SECONDS or 60]: runs a libFuzzer target for SECONDS over a scratch
# copy of its seed corpus, prints executions and crashes, and fails on any crash or leak.
set -euo pipefail
build=$1 target=$2 seconds=${3:-${MINFER_FUZZ_SECONDS:-60}}
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bin/fuzz-$target
[ -x "$bin" ] || { echo "run-fuzz: $bin not built (cmake --preset fuzz && cmake --build --preset fuzz)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here/corpus/$target/." "$work/"
mkdir -p "$work/artifacts"
set +e
"$bin" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 -rss_limit_mb=2048 \
  -timeout=10 -artifact_prefix="$work/artifacts/" "$work" >"$work/log" 2>&1
rc=$?
set -e
execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$work/log" | grep -Eo '[0-9]+$' || echo 0)
crashes=$(ls "$work/artifacts" | wc -l)
summary="fuzz-$target: ${seconds}s, $execs executions, $crashes crashes, exit $rc"
echo "$summary"
# scripts/test.sh collects these lines for its final report.
[ -n "${MINFER_FUZZ_SUMMARY:-}" ] && echo "$summary" >> "$MINFER_FUZZ_SUMMARY"
if [ $rc -ne 0 ] || [ "$crashes" -ne 0 ]; then
  tail -40 "$work/log"
  mkdir -p "$here/../../fuzz-out" && cp -r "$work/artifacts/." "$here/../../fuzz-out/" 2>/dev/null || true
  exit 1
fi
[ "$execs" -gt 0 ] || { echo "fuzz-$target: no executions"; exit 1; }
