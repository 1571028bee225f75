#!/usr/bin/env bash
# Graph exports of each supported family for `minfer viz --samples DIR` ("Select a sample model"):
# a random-weight model of tiny shapes and 4 layers per architecture (minfer-make-test-model),
# its prefill graph written by --dump-graph-json as DIR/FAMILY.json; the models are deleted.
#   scripts/make-viz-samples.sh build/bin ~/.cache/minfer/models/SmolLM2-135M-Instruct-Q4_1.gguf build/viz-samples
set -euo pipefail
bin=$1 vocab=$2 out=$3
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for arch in llama qwen2 qwen3 gemma2 gemma3 phi3 qwen3moe; do
  extra=()
  case $arch in
    gemma2|gemma3) extra=(--tied) ;;
    qwen3moe) extra=(--n-expert 4 --n-expert-used 2) ;;
  esac
  "$bin/minfer-make-test-model" --vocab-from "$vocab" --preset tiny --arch "$arch" --n-layer 4 "${extra[@]}" \
    --name "sample-$arch" --out "$tmp/$arch.gguf" >/dev/null
  "$bin/minfer" "$tmp/$arch.gguf" "What is the capital of France?" --dump-graph-json "$out/$arch.json" >/dev/null 2>&1
  rm -f "$tmp/$arch.gguf"
done
echo "$out: $(ls "$out" | tr '\n' ' ')"
