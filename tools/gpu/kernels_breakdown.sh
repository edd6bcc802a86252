#!/usr/bin/env bash
# Per-kernel breakdown of decode steps (`graphserve bench kernels`, CUPTI) on the GPU machine:
# llama3.2-1b greedy at bs 1 / 32 / 128 and sampled at bs 32, smollm2-135m at bs 1; or, with
# KB_SHAPES="preset:batch,sizes ...", those shapes greedy.
#   pack: GS_GPU_NO_BUILD=1 GS_GPU_TARGETS=graphserve bash tools/gpu/pack.sh build/release (results: final_h200.txt)
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/kernels_breakdown.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
kern() {  # kern <name> <args...>
  local name=$1; shift
  timeout 240 "$gs" bench kernels --load-format dummy --input-len 128 --top "${TOP:-12}" \
    --output-json "$out/kernels_$name.json" "$@" 2>"$out/kernels_$name.err" | tee "$out/kernels_$name.txt"
  tail -n 3 "$out/kernels_$name.err"
}
if [[ -n "${KB_SHAPES:-}" ]]; then
  for shape in $KB_SHAPES; do kern "${shape%%:*}" --preset "${shape%%:*}" --batch-sizes "${shape#*:}"; done
  exit 0
fi
kern llama1b --preset llama3.2-1b --batch-sizes 1,32,128
kern llama1b_sampled --preset llama3.2-1b --batch-sizes 32 --temperature 1.0 --top-p 0.95 --top-k 50
kern smollm --preset smollm2-135m --batch-sizes 1
