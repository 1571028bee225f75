#!/usr/bin/env bash
# Builds minfer (Release) into build/; the CLI lands at build/bin/minfer. Idempotent and quick
# when nothing changed (Ninja). Extra arguments are passed to the build (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake --preset release >/dev/null
fi
cmake --build build -- "$@"
