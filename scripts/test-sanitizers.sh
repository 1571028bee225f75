#!/usr/bin/env bash
# The threaded parts under sanitizers: builds the asan (ASan + UBSan) and tsan presets (only the
# targets needed), scans them for ISA code outside the dispatch (tests/isa/isa_scan.py), and runs
# the thread-pool stress test, the Vulkan op harness (ASan only, where the build has the backend), the engine test and the server's chaos,
# lifecycle, many-models (TSan), speculative-decoding and between-steps (embeddings, slot files) tests on each, and the download and command-line tests
# (tests/hub, tests/e2e/test_cli_compat.py) under ASan. A sanitizer report fails the run: ASan/UBSan abort, TSan makes
# the process exit 66, and every server test checks the exit code after SIGTERM and each CLI
# run's. Ends with "N passed, N failed". MINFER_SANITIZERS=asan or tsan picks one.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODEL=${MINFER_SMOLLM2:-${MINFER_MODEL_DIR:-$HOME/.cache/minfer/models}/SmolLM2-135M-Instruct-Q4_1.gguf}
GEMMA3=${MINFER_GEMMA3:-${MINFER_MODEL_DIR:-$HOME/.cache/minfer/models}/gemma3-270m-Q4_K_M.gguf}
passed=0
failed=0
run() {  # name, command...
  local name=$1; shift
  local t0=$SECONDS
  if "$@" > "$LOGDIR/$name.log" 2>&1; then
    passed=$((passed + 1)); echo "[sanitizers] PASS $name ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1)); echo "[sanitizers] FAIL $name ($((SECONDS - t0)) s): last lines of $LOGDIR/$name.log"
    tail -40 "$LOGDIR/$name.log"
  fi
  grep -h -A20 -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:" "$LOGDIR/$name.log" /tmp/minfer-serve-*.log 2>/dev/null | head -60
}
for preset in ${MINFER_SANITIZERS:-asan tsan}; do
  dir=$ROOT/build-$preset
  LOGDIR=$dir/sanitizer-logs
  if [ ! -f "$dir/build.ninja" ]; then cmake --preset "$preset" -DMINFER_TESTS=ON >/dev/null || { failed=$((failed + 1)); continue; }; fi
  mkdir -p "$LOGDIR"
  t_build=$SECONDS
  # The Vulkan op harness too where the build has the backend (its mutex, lavapipe's threads):
  # ASan + UBSan with leak checks; TSan does not see into the driver, so not there.
  vulkan=""
  if [ "$preset" = asan ] && ninja -C "$dir" -t targets all 2>/dev/null | grep -q '^test-vulkan-ops:'; then vulkan=test-vulkan-ops; fi
  if ! cmake --build "$dir" -- minfer minfer-make-test-model test-core-thread-pool test-server-engine $vulkan > "$LOGDIR/build.log" 2>&1; then
    echo "[sanitizers] FAIL build $preset"; tail -30 "$LOGDIR/build.log"; failed=$((failed + 1)); continue
  fi
  echo "[sanitizers] time: $(printf '%-26s %5d s' "$preset build" $((SECONDS - t_build)))"
  t_runs=$SECONDS
  # The sanitizer builds compile at -O1, where std templates stay out of line: the tree where an
  # ISA file's copy of one reached the tokenizer (tests/isa/isa_scan.py, docs/recipes.md).
  # run() shows sanitizer reports from the server logs too: start without other runs' logs (a
  # stale TSan report of an earlier, separate run was printed here under a passing check).
  rm -f /tmp/minfer-serve-*.log
  run "$preset.isa-scan" python3 tests/isa/isa_scan.py "$dir/bin/minfer" "$dir/tests/test-core-thread-pool" "$dir/tests/test-server-engine"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 suppressions=$ROOT/tests/server/tsan.supp"
  run "$preset.thread-pool" "$dir/tests/test-core-thread-pool"
  [ -z "$vulkan" ] || run "$preset.vulkan-ops" "$dir/tests/test-vulkan-ops"
  run "$preset.engine" env MINFER_SMOLLM2="$MODEL" "$dir/tests/test-server-engine"
  run "$preset.chaos" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" MINFER_CHAOS_SECONDS="${MINFER_SAN_CHAOS_SECONDS:-20}" \
    python3 -m pytest -q -s -p no:cacheprovider tests/server/test_chaos.py
  run "$preset.lifecycle" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" \
    python3 -m pytest -q -p no:cacheprovider tests/server/test_lifecycle.py
  # Speculative decoding where threads meet: drafting slots verified in one batch, four clients
  # at once, streams (the Release run covers the rest of test_speculative.py).
  run "$preset.speculative" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" \
    python3 -m pytest -q -p no:cacheprovider tests/server/test_speculative.py -k "concurrent or streaming"
  # Many models in one server (TSan: the pool's lock, loads outside it, evictions and keep_alive
  # unloads beside running requests, per-model metrics, Ollama's pull/copy/delete and num_ctx
  # reloads); the stream-during-a-load check is timing-bound.
  if [ "$preset" = tsan ]; then
    run "$preset.pool" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" MINFER_MAKE_MODEL="$dir/bin/minfer-make-test-model" \
      OLLAMA_NODE_MODULES="$ROOT/.deps/npm-ollama/node_modules" \
      python3 -m pytest -q -p no:cacheprovider tests/server/test_pool.py tests/server/test_metrics.py tests/server/test_ollama_store.py -k "not stall"
  fi
  # Work the engine does between generation steps for other threads: embedding chunks beside
  # streams, slot files saved and restored while other slots generate, replies that outlast the
  # 1 s grace period handed to the keep-alive writer (timing-bound checks, such as a hang-up
  # freeing its slot within seconds, stay in the Release run).
  run "$preset.server-steps" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" \
    python3 -m pytest -q -p no:cacheprovider tests/server/test_embeddings.py tests/server/test_slot_files.py \
      -k "beside_completions or across_slots or busy_slot"
  # The downloaders parse what servers send (headers, JSON, manifests): ASan + UBSan only
  # (single-threaded, nothing for TSan to see).
  if [ "$preset" = asan ]; then
    run "$preset.hub" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" \
      python3 -m pytest -q -p no:cacheprovider tests/hub/test_hub.py
    # The command line: option parsing, session files (refused, archived, failed saves), Ctrl-C
    # in prefill and generation (Gemma 3's sliding-window ring too), the [load] ticker thread,
    # pseudo-terminal runs.
    run "$preset.cli" env MINFER_BIN="$dir/bin/minfer" MINFER_SMOLLM2="$MODEL" MINFER_GEMMA3="$GEMMA3" \
      python3 -m pytest -q -p no:cacheprovider tests/e2e/test_cli_compat.py -k "not greedy_text"
  fi
  echo "[sanitizers] time: $(printf '%-26s %5d s' "$preset tests" $((SECONDS - t_runs)))"
done
echo "sanitizers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
