#!/usr/bin/env bash
# Graph exports of each supported family for "Select a sample model" in `minfer viz` (docs/viz.md):
# a random-weight model of tiny shapes, 4 layers and our own byte vocabulary per architecture
# (minfer-make-test-model --vocab-bytes: no downloaded file needed), its prefill graph
# (--dump-graph-json of a prompt) and its decode graph (`minfer logits --tokens 1`), written as
# OUT/FAMILY.json in the /viz/graph form {"model", "prefill", "decode"}; the models are deleted.
# The default build runs it (target viz-samples, in ALL) into BUILD/viz-samples (time: docs/viz.md).
# A failing step prints the tools' output (kept in the temp folder's log).
#   scripts/make-viz-samples.sh build/bin build/viz-samples
set -euo pipefail
bin=$1 out=$2
mkdir -p "$out"
tmp=$(mktemp -d)
log=$tmp/log
trap 'rc=$?; if [ $rc -ne 0 ] && [ -s "$log" ]; then echo "make-viz-samples: failed; the tools said:" >&2; cat "$log" >&2; fi; rm -rf "$tmp"' EXIT
for arch in llama qwen2 qwen3 gemma2 gemma3 phi3 qwen3moe; do
  extra=()
  case $arch in
    gemma2|gemma3) extra=(--tied) ;;
    qwen3moe) extra=(--n-expert 4 --n-expert-used 2) ;;
  esac
  m=$tmp/$arch.gguf
  "$bin/minfer-make-test-model" --vocab-bytes --preset tiny --arch "$arch" --n-layer 4 "${extra[@]}" \
    --name "sample-$arch" --out "$m" >>"$log" 2>&1
  "$bin/minfer" "$m" "What is the capital of France?" --no-template -c 512 -t 1 \
    --dump-graph-json "$tmp/prefill.json" >>"$log" 2>&1
  "$bin/minfer" logits "$m" --tokens 1 -c 512 -t 1 --dump-graph-json "$tmp/decode.json" >>"$log" 2>&1
  { printf '{"model":"sample-%s","prefill":' "$arch"; cat "$tmp/prefill.json"
    printf ',"decode":'; cat "$tmp/decode.json"; printf '}\n'; } > "$tmp/$arch.json"
  mv "$tmp/$arch.json" "$out/$arch.json"
  rm -f "$m"
done
echo "$out: $(cd "$out" && ls -- *.json | tr '\n' ' ')"
