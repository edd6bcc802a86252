#!/usr/bin/env bash
# Issue 8, the bs-1 decode step (branch attn): the split tensor-core decode attention and the
# residual add + norm folded into the GEMVs, on one GPU in one device call.
#   pack: GS_GPU_NO_BUILD=1 GS_GPU_PACK=<repo>/.gpu-attn GS_GPU_TARGETS="graphserve gs_test_cuda" \
#         bash tools/gpu/pack.sh build/release; cp tools/gpu/{env.sh,decode_fns.sh,attn_decode.sh} .gpu-attn/
#   device run, kind nvidia-h200, carry [".gpu-attn"], command: bash .gpu-attn/attn_decode.sh
# GS_STAGE=ab (default): the GPU tests of attention, ops, model and graphs, then A/B of the
#   environment switches (GS_AB128 / GS_AB4096 words: default or NAME=VALUE) on llama3.2-1b at
#   prompts 128 and 4096, bs 1 / 4 / 8.
# GS_STAGE=final: every GPU test, bench graphs (NONE vs FULL_AND_PIECEWISE) on llama3.2-1b bs 1 / 32
#   / 128 at prompts 128 and 4096, smollm2-135m, qwen3-0.6b and llama3.1-8b at bs 1, bench kernels
#   on llama3.2-1b (bs 1 / 32 / 128) and smollm2-135m / qwen3-0.6b (bs 1), and the A/B against
#   main's policy (GS_TC_DECODE_MIN_PAIRS=64 GS_GEMV_KSPLIT=0). (The norm fusion it also timed,
#   GS_NORM_FUSION=1, is gone: it lost.)
set -uo pipefail
# shellcheck source=tools/gpu/decode_fns.sh
source "$(cd "$(dirname "$0")" && pwd)/decode_fns.sh"

if [[ ${GS_STAGE:-ab} == ab ]]; then
  tests 240 "${GS_TESTS:-PrefillAttention.*:CudaAttention*:CudaOps*:CudaModel*:CudaGraph*:CudaSpec*}"
  {
    for v in ${GS_AB128:-default GS_TC_DECODE_MIN_PAIRS=64 GS_TC_SPLIT_MIN_TILES=1}; do
      [[ $v == default ]] && v=GS_AB_DEFAULT=1
      graphs llama3.2-1b 1,4,8 128 FULL_AND_PIECEWISE "$v"
    done
    for v in ${GS_AB4096:-default GS_TC_DECODE_MIN_PAIRS=64 GS_TC_SPLIT_MIN_TILES=4 GS_TC_SPLIT_TARGET=512}; do
      [[ $v == default ]] && v=GS_AB_DEFAULT=1
      graphs llama3.2-1b 1,4,8 4096 FULL_AND_PIECEWISE "$v"
    done
  } 2>&1 | tee "$out/ab.txt"
  kernels llama3.2-1b 1 128 8 | tee "$out/kernels_ab.txt"
  exit 0
fi

tests 300
{
  echo "== bench graphs (dummy weights, output 32, ms per decode step)"
  for len in 128 4096; do graphs llama3.2-1b 1,32,128 $len NONE,FULL_AND_PIECEWISE; done
  graphs smollm2-135m 1 128 NONE,FULL_AND_PIECEWISE
  graphs qwen3-0.6b 1 128 NONE,FULL_AND_PIECEWISE
  graphs llama3.1-8b 1 128 NONE,FULL_AND_PIECEWISE
  echo "== A/B, FULL_AND_PIECEWISE: default vs main's policy (GS_TC_DECODE_MIN_PAIRS=64 GS_GEMV_KSPLIT=0)"
  before="GS_TC_DECODE_MIN_PAIRS=64 GS_GEMV_KSPLIT=0"
  for len in 128 4096; do
    graphs llama3.2-1b 1,4,8 $len FULL_AND_PIECEWISE GS_AB_DEFAULT=1
    graphs llama3.2-1b 1,4,8 $len FULL_AND_PIECEWISE $before
  done
  for p in smollm2-135m qwen3-0.6b llama3.1-8b; do graphs $p 1 128 FULL_AND_PIECEWISE $before; done
} 2>&1 | tee "$out/graphs.txt"
{
  echo "== bench kernels llama3.2-1b prompt 128"
  kernels llama3.2-1b 1,32,128 128 8
  echo "== bench kernels llama3.2-1b prompt 4096"
  kernels llama3.2-1b 1 4096 5
  for p in smollm2-135m qwen3-0.6b; do echo "== bench kernels $p"; kernels $p 1 128 8; done
} 2>&1 | tee "$out/kernels.txt" | grep -E '^(==|batch)|attention|rms_norm|gemv'
