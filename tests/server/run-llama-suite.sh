#!/usr/bin/env bash
# Runs the llama.cpp server tests listed in llama-suite-pass.txt against `minfer serve` (through
# llama-server-wrapper.py) in a scratch copy of .deps/llama.cpp/tools/server/tests; with --all,
# the whole non-slow suite, with a line per test (-rA) and the counts per file at the end; with
# --all unit/FILE.py[::TEST] ..., only those (the same way).
#   MINFER_BIN=build/bin/minfer tests/server/run-llama-suite.sh [--all [unit/FILE.py ...]] [extra pytest args]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
src=$root/.deps/llama.cpp/tools/server/tests
[ -d "$src/unit" ] || { echo "missing $src (scripts/setup.sh fetches llama.cpp)"; exit 1; }
work=$(mktemp -d /tmp/minfer-llama-suite.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
# Their session fixture starts every preset once to download its model from the Hub (offline
# here): a preset minfer cannot serve (an embedding or reranking model, a router) would fail
# the whole session, so the scratch copy skips it; each test still starts its own server.
sed -i 's/^\( *\)ServerPreset.load_all()/\1pass  # minfer: nothing to download/' "$work/conftest.py"
grep -q "minfer: nothing to download" "$work/conftest.py" || { echo "conftest.py changed: load_all() not found"; exit 1; }
if [ "${1:-}" = --all ]; then
  shift
  only=()
  while [ $# -gt 0 ] && [[ "$1" == unit/* ]]; do only+=("$1"); shift; done
  [ ${#only[@]} -gt 0 ] || only=(unit)
  tests=("${only[@]}" -m "not slow" -rA)
else
  mapfile -t tests < <(grep -v '^#' "$here/llama-suite-pass.txt" | grep -v '^$')
fi
cd "$work"
# Files their tests download with wget (no network here): present, so they are not fetched; the
# wrapper serves our model whatever they name.
mkdir -p tmp && ln -sf "${MINFER_SMOLLM2:-$HOME/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf}" tmp/stories15M-q4_0.gguf
LLAMA_SERVER_BIN_PATH=$here/llama-server-wrapper.py PORT=${PORT:-$((20000 + RANDOM % 20000))} \
  python3 -m pytest -q -p no:cacheprovider "${tests[@]}" "$@"
