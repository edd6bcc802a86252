#!/usr/bin/env bash
# Decode attention at small batch, A/B over the flash-decoding split policy and PDL (environment
# switches, no rebuild): bench kernels (CUPTI) and bench graphs on llama3.2-1b at bs 1 and 8.
#   device run, kind nvidia-h200, carry [".gpu"] (tools/gpu/pack.sh), command: bash tools/gpu/decode_attention_ab.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export GRAPHSERVE_LOG_LEVEL=warn
for v in ${GS_AB:-default GS_MAX_SPLITS=1 GS_MAX_SPLITS=4 GS_CUDA_PDL=0}; do  # GS_AB: default or NAME=VALUE words
  echo "== $v"
  [[ $v == default ]] && v=GS_AB_NONE=1
  env $v timeout 120 "$gs" bench kernels --load-format dummy --preset llama3.2-1b --batch-sizes 1,8 --top 4 \
    --input-len ${GS_INPUT_LEN:-128} 2>/dev/null | grep -E '^batch|attention|gemv_kernel<unsigned short, 1, Plain'
  env $v timeout 120 "$gs" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1,8 --input-len \
    ${GS_INPUT_LEN:-128} --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' \
    2>/dev/null | grep -E '^FULL_AND_PIECEWISE +[0-9]'
done
