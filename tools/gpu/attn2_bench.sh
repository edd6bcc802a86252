#!/usr/bin/env bash
# Issue 8, bs-128 decode attention (branch attn2): the final check in one device call.
#   pack: GRAPHSERVE_SHARED=/work/shared GS_GPU_GOLDEN=1 GS_GPU_NO_BUILD=1 GS_GPU_PACK=<repo>/.gpu-attn2 \
#         GS_GPU_TARGETS="graphserve gs_test_cuda" bash tools/gpu/pack.sh build/release
#         cp tools/gpu/{env.sh,decode_fns.sh,attn2_bench.sh} .gpu-attn2/   (over 64 MiB: carry an xz tarball)
#   device run, kind nvidia-h200, carry [".gpu-attn2"], command: bash .gpu-attn2/attn2_bench.sh
# Every GPU test; bench graphs FULL_AND_PIECEWISE on the issue-8 shapes (llama3.2-1b bs 1 / 32 / 128
# prompt 128, bs 1 / 32 prompt 4096; smollm2-135m bs 1 / 128; qwen3-0.6b bs 1 / 64 / 128); the A/B of
# the warp-per-pair kernel against the tensor-core one (GS_TC_WARP_PAIRS=0) where it is the
# default (qwen3-0.6b, head dim 128); bench kernels at bs 128 (llama3.2-1b, qwen3-0.6b).
set -uo pipefail
# shellcheck source=tools/gpu/decode_fns.sh
source "$(cd "$(dirname "$0")" && pwd)/decode_fns.sh"
F=FULL_AND_PIECEWISE
[[ -z "${GS_SKIP_TESTS:-}" ]] && tests 300 "${GS_TESTS:-}"
{
  echo "== bench graphs ($F, dummy weights, ms per decode step)"
  graphs llama3.2-1b 1,32,128 128 $F
  graphs llama3.2-1b 1,32 4096 $F
  graphs smollm2-135m 1,128 128 $F
  graphs qwen3-0.6b 1,64,128 128 $F
  echo "== A/B ($F): the tensor-core decode kernel"
  graphs qwen3-0.6b 64,128 128 $F GS_TC_WARP_PAIRS=0
} 2>&1 | tee "$out/graphs.txt"
{
  echo "== bench kernels bs 128"
  kernels llama3.2-1b 128 128 8
  kernels qwen3-0.6b 128 128 8
} 2>&1 | tee "$out/kernels.txt" >/dev/null
echo "== summary"
grep -E '^\[  (FAILED|PASSED) |^\[==========\]' "$out/tests.log" 2>/dev/null | tail -n 8
grep -iE '^batch|attention|decode_warp' "$out/kernels.txt" | cut -c1-130
cat "$out/graphs.txt"
