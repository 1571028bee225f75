#!/usr/bin/env bash
# What each part of the CPU speed work buys, on one binary: the default against the switches
# that turn a part off (MINFER_REPACK=0: row kernels over the mmap'd weights; MINFER_ISA=avx512:
# no AMX tiles; MINFER_ISA=avx2: AVX2 kernels only; MINFER_HUGE_PAGES=0: the repacked weights
# on 4 KiB pages; -t 1: one thread). Prints "model config pp512=.. tg128=.. load=.." lines.
#   bench/ab-switches.sh [build dir] [model files...]   (default: Qwen2.5-0.5B Q4_0 and Q4_K_M
#   from bench/compare.py's cache)
set -euo pipefail
B=${1:-build}/bin/minfer
shift || true
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  MODELS=(~/.cache/minfer/bench/qwen2.5-0.5b-Q4_0.gguf ~/.cache/minfer/bench/qwen2.5-0.5b-Q4_K_M.gguf)
fi
for f in "${MODELS[@]}"; do
  for cfg in "default:" "no-repack:MINFER_REPACK=0" "isa-avx512:MINFER_ISA=avx512" "isa-avx2:MINFER_ISA=avx2" \
             "4k-pages:MINFER_HUGE_PAGES=0" "1-thread:T1"; do
    name=${cfg%%:*}; envs=${cfg#*:}; t=2
    if [ "$envs" = "T1" ]; then envs=""; t=1; fi
    out=$(env $envs "$B" bench "$f" -p 512 -n 128 -r 2 -t $t -o json |
      python3 -c "import json,sys; r=json.load(sys.stdin); print(' '.join('%s=%.1f' % ('pp512' if x['n_prompt'] else 'tg128', x['avg_ts']) for x in r), 'load=%.2f' % r[0]['load_seconds'])")
    echo "$(basename "$f" .gguf) $name $out"
  done
done
