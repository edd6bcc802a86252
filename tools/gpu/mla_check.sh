#!/usr/bin/env bash
# The MLA (DeepSeek-V2/V3) check in one device call, run from a pack folder made by
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=<dir> tools/gpu/pack.sh build/release
#   cp tools/gpu/mla_check.sh <dir>/ && cp -r tests/data/families <dir>/families
# device run, kind nvidia-h200, carry [<dir>], command: bash <dir>/mla_check.sh   (about 3 min)
# (Or from the repository with the pack in .gpu: bash tools/gpu/mla_check.sh.)
#
# 1. GPU tests: the CUDA MLA backend against the CPU reference on a mixed batch (f32, bf16), and
#    the DeepSeek fixtures through the ModelRunner in FULL_AND_PIECEWISE (f32: HF's greedy tokens;
#    bf16: the prefix equal to them);
# 2. graphserve info --preset deepseek-v2-lite: total / active parameters, KV bytes a token;
# 3. bench graphs of dummy deepseek-v2-lite at bs 1 and 32 in $MLA_MODES (FULL_AND_PIECEWISE), with
#    the start-up lines naming the MLA backend, its declared support and the resolved mode.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -x $here/bin/graphserve ]]; then pack=$here; else pack=${PACK:-$(cd "$here/../.." && pwd)/.gpu}; fi
out=${OUT:-$pack/gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared
fixtures=$pack/families
[[ -d $fixtures ]] || fixtures=$(cd "$here/../.." && pwd)/tests/data/families  # run from the repository
export GS_FAMILY_FIXTURES=${GS_FAMILY_FIXTURES:-$fixtures}
gs=$pack/bin/graphserve
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

echo "== 1. GPU tests"
timeout 70 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='CudaMla*:*DeepSeekOnCuda*' \
  >"$out/mla_tests.log" 2>&1
grep -E '^\[  (FAILED|PASSED) |mla-cuda|Failure|rror' "$out/mla_tests.log" | head -n 40

echo "== 2. info"
"$gs" info --preset deepseek-v2-lite | grep -E '^(parameters|active|multi-head|  kv cache per)'

echo "== 3. bench graphs deepseek-v2-lite"
GRAPHSERVE_LOG_LEVEL=info timeout "${MLA_BENCH_TIMEOUT:-150}" "$gs" bench graphs --load-format dummy --preset deepseek-v2-lite \
  --batch-sizes 1,32 --input-len 128 --output-len 32 --num-iters 3 --modes "${MLA_MODES:-FULL_AND_PIECEWISE}" \
  --output-png '' --output-json '' >"$out/mla_bench.log" 2>&1
grep -E "^(mode|NONE|FULL|device)|attention backend|cudagraph mode|KV cache:|MoE:|rror" "$out/mla_bench.log" |
  grep -v 'capture 0.00 s' | head -n 40
