#!/usr/bin/env bash
# The gpt-oss check in one device call, run from a pack folder (the device gets /work/main, so the
# pack carries the fixtures and this script). Pack, from the branch's checkout:
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=/work/main/.gpu-gptoss \
#     tools/gpu/pack.sh build/release
#   mkdir /work/main/.gpu-gptoss/families
#   cp -r tests/data/families/{gpt_oss,mixtral} /work/main/.gpu-gptoss/families/
#   cp tools/gpu/gptoss_check.sh tools/hf_fixtures/{make_family_fixtures,fp8_fixtures}.py /work/main/.gpu-gptoss/
#   (cd /work/main/.gpu-gptoss && strip bin/* && tar cf - bin lib | xz -T2 > bins.tar.xz && rm -rf bin lib)
# (the binaries travel xz-compressed: the carried tree must stay under 64 MiB)
# device run, kind nvidia-h200, carry [".gpu-gptoss"], command: bash .gpu-gptoss/gptoss_check.sh
# (about 3 min).
#
# 1. GPU tests: attention sinks on flash-decoding against the CPU reference (split and unsplit,
#    with and without a window), the MoE experts' gpt-oss epilogue (biases, clamped SwiGLU) and the
#    other MoE ops, the gpt_oss fixture (and mixtral, a check of the untouched path) in bf16
#    against HF's f32;
# 2. dummy gpt-oss-20b: info (total vs active parameters), bench graphs at bs 1 / 32 in
#    FULL_AND_PIECEWISE;
# 3. HF's own bf16 on the same fixtures (make_family_fixtures.py bf16), the reference for 1's
#    bf16 numbers.
set -uo pipefail
pack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$pack/logs}
[[ -d $pack/bin || ! -f $pack/bins.tar.xz ]] || tar xJf "$pack/bins.tar.xz" -C "$pack"
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared GS_FAMILY_FIXTURES=$pack/families GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
gs=$pack/bin/graphserve
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

echo "== 1. GPU tests"
timeout 60 "$pack/bin/gs_test_cuda" --gtest_color=no \
  --gtest_filter='MoeOps*:*CudaAttentionTest.Sinks*:*FamiliesBf16*gpt_oss*:*FamiliesBf16*mixtral*' \
  >"$out/gptoss_gpu_tests.log" 2>&1
echo "gs_test_cuda rc=$?"
grep -E '^\[  (FAILED|PASSED) |families-bf16|Failure|tests? from .* ran' "$out/gptoss_gpu_tests.log" | head -n 40

echo "== 2. gpt-oss-20b (dummy weights)"
"$gs" info --preset gpt-oss-20b 2>&1 | grep -Ei 'param|gpt-oss'
GRAPHSERVE_LOG_LEVEL=info timeout 165 "$gs" bench graphs --load-format dummy --preset gpt-oss-20b --batch-sizes 1,32 \
  --input-len 128 --output-len 32 --num-iters 3 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' 2>&1 |
  tee "$out/gptoss_bench.log" | grep -E '^(mode|NONE|FULL|device)|rror|MoE|attention|loaded' | grep -v 'capture 0.00 s'
echo "bench rc=${PIPESTATUS[0]}"

echo "== 3. HF bf16 on the same fixtures"
[[ -f $pack/make_family_fixtures.py ]] &&
  PYTHONUNBUFFERED=1 timeout 90 python3 "$pack/make_family_fixtures.py" bf16 "$pack/families" "$out/hf_bf16.json" 2>&1 |
  grep -E 'hf-bf16|rror'
