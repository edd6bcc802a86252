#!/usr/bin/env bash
# Decode speed of dummy deepseek-v2-lite (the CUDA MLA backend) in one device call, run from a
# pack folder made by
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=<dir> tools/gpu/pack.sh build/release
#   cp tools/gpu/mla_decode_bench.sh <dir>/ && mkdir <dir>/families && cp -r tests/data/families/deepseek* <dir>/families/
#   (optional, a same-call baseline: cp <baseline build>/graphserve <dir>/bin/graphserve-base)
#   (cd <dir> && tar cf - bin lib | xz -T2 -2 >bl.tar.xz && rm -rf bin lib)   # under the 64 MiB carry limit
# device run, kind nvidia-h200, carry [<dir>], command: bash <dir>/mla_decode_bench.sh   (about 2.5 min with
# the baseline, 1 min without)
#
# 1. the MLA GPU tests (kernels against the CPU reference, the DeepSeek fixtures through the runner);
# 2. bench kernels (CUPTI, per-kernel time a step) at bs 1 and 32, this build then the baseline;
# 3. bench graphs ms/step at bs 1 and 32 (FULL_AND_PIECEWISE), input 128 then $MLA_LONG_INPUT
#    (2048), this build then the baseline.
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
[[ -f $pack/bl.tar.xz && ! -d $pack/bin ]] && tar xJf "$pack/bl.tar.xz" -C "$pack"
out=${OUT:-$pack/gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared GS_FAMILY_FIXTURES=$pack/families
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
common=(--load-format dummy --preset deepseek-v2-lite --max-num-seqs 32)
builds=(graphserve)
[[ -x $pack/bin/graphserve-base ]] && builds+=(graphserve-base)

echo "== GPU tests"
timeout "${MLA_TESTS_TIMEOUT:-60}" "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='CudaMla*:*DeepSeek*' \
  >"$out/mla_tests.log" 2>&1
grep -E '^\[  (FAILED|PASSED) |^\[       OK|mla-cuda|Failure|rror' "$out/mla_tests.log" | head -n 40

for b in "${builds[@]}"; do
  echo "== bench kernels: $b"
  GRAPHSERVE_LOG_LEVEL=warn timeout "${MLA_KERNELS_TIMEOUT:-50}" "$pack/bin/$b" bench kernels "${common[@]}" --input-len 128 --batch-sizes 1,32 --output-len 9 \
    --top "${TOP:-16}" >"$out/kernels_$b.txt" 2>&1  # one file a run: the device returns at most 8
  cat "$out/kernels_$b.txt"
done

for input in 128 "${MLA_LONG_INPUT:-2048}"; do
  for b in "${builds[@]}"; do
    echo "== bench graphs: $b, input $input"
    GRAPHSERVE_LOG_LEVEL=info timeout "${MLA_GRAPHS_TIMEOUT:-40}" "$pack/bin/$b" bench graphs "${common[@]}" --input-len "$input" \
      --batch-sizes 1,32 --output-len 16 --num-iters 2 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' \
      >"$out/graphs_${b}_$input.log" 2>&1
    grep -E "^(mode|NONE|FULL|device)|attention backend|cudagraph mode|rror" "$out/graphs_${b}_$input.log" |
      grep -v 'capture .* graphs$' | head -n 12
  done
done
