#!/usr/bin/env bash
# llama.cpp's own Vulkan build as a device oracle (issue 40, docs/backends.md): installs npm
# @node-llama-cpp/linux-x64-vulkan and the matching node-llama-cpp source tree (headers only)
# into $DIR, builds llama-oracle against them, and prints the logits' NMSE of the prompt for
#   llama.cpp Vulkan (on the first Vulkan device, lavapipe here) vs llama.cpp CPU,
#   minfer Vulkan (-ngl all --device Vulkan0) vs llama.cpp CPU,
#   minfer Vulkan vs llama.cpp Vulkan.
# Not a CI test (a 50 MB download and minutes of lavapipe): a measuring tool.
#
#   tests/oracle/llama/vulkan-oracle.sh MODEL.gguf 1,504,3458,282 [DIR]
set -euo pipefail
MODEL=${1:?MODEL.gguf}
TOKENS=${2:?token ids, comma-separated}
DIR=${3:-/tmp/minfer-vulkan-oracle}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
VER=3.22.1
mkdir -p "$DIR"
BINS=$DIR/node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan
if [ ! -d "$BINS" ]; then
  (cd "$DIR" && npm install --omit=optional --no-audit --no-fund "@node-llama-cpp/linux-x64-vulkan@$VER" "node-llama-cpp@$VER" >/dev/null)
fi
[ -d "$DIR/src" ] || git clone -q "$DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$DIR/src"
LLAMA=$(ls "$BINS"/libllama.vulkan.v*.so | head -1)
GGML=$(ls "$BINS"/libggml.vulkan.v*.so | head -1)
ORACLE=$DIR/llama-oracle-vulkan
if [ ! -x "$ORACLE" ]; then
  g++ -std=c++20 -O2 -I"$DIR/src/include" -I"$DIR/src/ggml/include" -I"$ROOT/tests/oracle" -I"$ROOT/src" \
    -I"$ROOT/build/inc" "$ROOT/tests/oracle/llama/llama-oracle.cpp" -o "$ORACLE" \
    -DMINFER_LLAMA_BINS_DEFAULT="\"$BINS\"" -L"$BINS" -l:"$(basename "$LLAMA")" -l:"$(basename "$GGML")" \
    -l:libggml-base.so "$ROOT/build/src/core/libminfer_core.a" -lfmt -ldl -Wl,-rpath,"$BINS"
fi
"$ORACLE" logits "$MODEL" --tokens "$TOKENS" --out "$DIR/llama-cpu.f32" >/dev/null
MINFER_ORACLE_NGL=999 GGML_VK_VISIBLE_DEVICES=0 "$ORACLE" logits "$MODEL" --tokens "$TOKENS" --out "$DIR/llama-vulkan.f32" >/dev/null
"$ROOT/build/bin/minfer" logits "$MODEL" --tokens "$TOKENS" --out "$DIR/minfer-vulkan.f32" -ngl all --device Vulkan0 >/dev/null
python3 - "$DIR" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
load = lambda name: np.fromfile(f"{d}/{name}.f32", dtype=np.float32)
cpu, lvk, mvk = load("llama-cpu"), load("llama-vulkan"), load("minfer-vulkan")
nmse = lambda ref, x: float(np.sum((ref - x) ** 2) / np.sum(ref ** 2))
print(f"llama.cpp Vulkan vs llama.cpp CPU: NMSE {nmse(cpu, lvk):.3g}")
print(f"minfer Vulkan vs llama.cpp CPU:    NMSE {nmse(cpu, mvk):.3g}")
print(f"minfer Vulkan vs llama.cpp Vulkan: NMSE {nmse(lvk, mvk):.3g}")
PY
