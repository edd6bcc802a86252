#!/usr/bin/env bash
# Issue 8, large-batch decode (branch attn): the decode attention's warp split and the GEMMs at bs 32
# / 128, on one GPU in one device call.
#   pack: GS_GPU_NO_BUILD=1 GS_GPU_PACK=<repo>/.gpu-attn GS_GPU_TARGETS="graphserve gs_test_cuda" \
#         bash tools/gpu/pack.sh build/release; cp tools/gpu/{env.sh,decode_fns.sh,attn_batch.sh} .gpu-attn/
#   device run, kind nvidia-h200, carry [".gpu-attn"], command: bash .gpu-attn/attn_batch.sh
# GS_STAGE=ab (default): the attention / model / graph GPU tests, then A/B of the environment
#   switches in GS_AB (words: default or NAME=VALUE[,NAME=VALUE]) on llama3.2-1b bs 1 / 32 / 128
#   (prompts 128 and 4096), smollm2-135m bs 1 / 128, qwen3-0.6b bs 1, and bench kernels.
# GS_STAGE=final: every GPU test (pack with GS_GPU_GOLDEN=1), bench graphs (NONE vs
#   FULL_AND_PIECEWISE, prompt 128) and bench kernels on llama3.2-1b bs 1 / 32 / 128, smollm2-135m
#   bs 1 / 128, qwen3-0.6b bs 1, the A/B of GS_AB on llama3.2-1b and the GEMM autotune against the
#   heuristic's pick at bs 32 / 128 (FULL_AND_PIECEWISE).
set -uo pipefail
# shellcheck source=tools/gpu/decode_fns.sh
source "$(cd "$(dirname "$0")" && pwd)/decode_fns.sh"

ab() {  # ab <preset> <batch sizes> <input len>: FULL_AND_PIECEWISE for every word of GS_AB
  for v in ${GS_AB:-default GS_TC_DECODE_OCC=0 GS_TC_WARP_SPLIT=0,GS_TC_STAGE=0,GS_TC_DECODE_OCC=0}; do
    [[ $v == default ]] && v=GS_AB_DEFAULT=1
    # shellcheck disable=SC2046
    graphs "$1" "$2" "$3" FULL_AND_PIECEWISE $(tr , ' ' <<<"$v")
  done
}

if [[ ${GS_STAGE:-ab} == ab ]]; then
  tests 240 "${GS_TESTS:-PrefillAttention.*:CudaAttention*:CudaOps*:CudaModel*:CudaGraph*}"
  {
    echo "== A/B (FULL_AND_PIECEWISE, ms per decode step)"
    ab llama3.2-1b 1,32,128 128
    ab llama3.2-1b 1,32 4096
    ab smollm2-135m 1,128 128
    ab qwen3-0.6b 1 128
  } 2>&1 | tee "$out/ab.txt"
  kernels llama3.2-1b 1,32,128 128 8 | tee "$out/kernels_ab.txt"
  exit 0
fi

tests 300
{
  echo "== bench graphs (dummy weights, prompt 128, output 32, ms per decode step)"
  graphs llama3.2-1b 1,32,128 128 NONE,FULL_AND_PIECEWISE
  graphs smollm2-135m 1,128 128 NONE,FULL_AND_PIECEWISE
  graphs qwen3-0.6b 1 128 NONE,FULL_AND_PIECEWISE
  echo "== A/B (FULL_AND_PIECEWISE)"
  ab llama3.2-1b 1,32,128 128
  ab llama3.2-1b 1,32 4096
  ab smollm2-135m 1,128 128
  echo "== cuBLASLt autotune (-cc.compile_sizes=[32,128]) vs the heuristic's pick, FULL_AND_PIECEWISE"
  timeout 150 "$gs" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 32,128 --input-len 128 \
    --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' \
    -cc.compile_sizes='[32,128]' 2>/dev/null | grep -E '^FULL' | sed 's/^/  llama3.2-1b p128 tuned | /'
} 2>&1 | tee "$out/graphs.txt"
{
  echo "== bench kernels llama3.2-1b"
  kernels llama3.2-1b 1,32,128 128 10
  echo "== bench kernels llama3.2-1b, GS_TC_DECODE_OCC=0 (three CTAs an SM)"
  kernels llama3.2-1b 128 128 3 GS_TC_DECODE_OCC=0
  echo "== bench kernels llama3.2-1b, GS_TC_WARP_SPLIT=0 GS_TC_STAGE=0 GS_TC_DECODE_OCC=0 (attention as on main)"
  kernels llama3.2-1b 1,32,128 128 3 GS_TC_WARP_SPLIT=0 GS_TC_STAGE=0 GS_TC_DECODE_OCC=0
  echo "== bench kernels smollm2-135m"
  kernels smollm2-135m 1,128 128 6
  echo "== bench kernels qwen3-0.6b"
  kernels qwen3-0.6b 1 128 6
} 2>&1 | tee "$out/kernels.txt"
