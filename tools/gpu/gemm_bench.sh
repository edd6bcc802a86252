#!/usr/bin/env bash
# The skinny decode GEMM's GPU check in one device call (results/gemm_h200.txt): gs_test_cuda
# (TESTS filters it, default all); CudaBench.Linear (the skinny GEMM on every shape at M 2..128,
# with and without its weight prefetch, beside cuBLASLt); decode steps A/B through env_ab.sh
# (default; GS_SKINNY_GEMM=0 = cuBLASLt; no prefetch; the skinny GEMM on every shape up to M 32) on
# llama3.2-1b and llama3.1-8b; bench kernels at bs 8 / 32 on llama3.2-1b.
#   pack: GS_GPU_NO_BUILD=1 GS_GPU_PACK=<main>/.gpu-gemm GS_GPU_TARGETS="graphserve gs_test_cuda" \
#         bash tools/gpu/pack.sh build/release; cp tools/gpu/gemm_bench.sh <main>/.gpu-gemm/run.sh
#   device run, kind nvidia-h200, carry [".gpu-gemm"], command: bash .gpu-gemm/run.sh
#   (or from a checkout with the pack in .gpu: bash tools/gpu/gemm_bench.sh)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -f $here/env.sh ]]; then
  source "$here/env.sh"
else  # run as <pack>/run.sh
  export PACK=$here
  # shellcheck source=tools/gpu/env.sh
  source "$here/../tools/gpu/env.sh"
fi
export PACK=$pack
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} GS_FAMILY_FIXTURES=$root/tests/data/families
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ -z "${SKIP_TESTS:-}" ]]; then
  start=$SECONDS
  timeout "${TEST_TIMEOUT:-330}" "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="${TESTS:-*}" \
    >"$out/tests.log" 2>&1
  echo "== gs_test_cuda ${TESTS:-*}: exit $? in $((SECONDS - start)) s"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]' "$out/tests.log" | tail -n 20
fi
echo "== CudaBench.Linear, us (TB/s): skinny GEMM (M 2..128, every shape) with / without the weight prefetch, cuBLASLt"
for pf in 1 0; do
  GS_CUDA_BENCH=1 GS_SKINNY_GEMM=all GS_SKINNY_MAX_M=128 GS_SKINNY_PREFETCH=$pf timeout 200 "$pack/bin/gs_test_cuda" \
    --gtest_color=no --gtest_filter=CudaBench.Linear 2>&1 | grep '^\[bench\] *[0-9]' >"$out/linear_pf$pf.txt"
done
paste "$out/linear_pf1.txt" "$out/linear_pf0.txt" |
  awk '{printf "%-12s %4s  skinny %7.2f (%4.2f)  no-prefetch %7.2f (%4.2f)  cublasLt %7.2f (%4.2f)\n", $2, $3, $4, $5, $11, $12, $6, $7}' |
  tee "$out/linear.txt"
echo "== decode steps, FULL_AND_PIECEWISE, prompt 128, ms/step (env_ab.sh)"
GS_AB=${GS_AB:-"default GS_SKINNY_GEMM=0 GS_SKINNY_PREFETCH=0 GS_SKINNY_GEMM=all,GS_SKINNY_MAX_M=32"} AB_ROUNDS=${AB_ROUNDS:-1} \
  AB_SHAPES=${AB_SHAPES:-"llama3.2-1b:1,8,16,32,128 llama3.1-8b:8,32,128"} timeout 330 bash "$root/tools/gpu/env_ab.sh" |
  grep -v '^NVIDIA' | awk '{printf "%-40s %-12s bs %4s  %s ms\n", $2, $3, $5, $6}' | tee "$out/ab.txt"
echo "== bench kernels, llama3.2-1b"
timeout 120 "$gs" bench kernels --load-format dummy --preset llama3.2-1b --batch-sizes 8,32 --input-len 128 \
  --top 8 2>/dev/null | tee "$out/kernels_llama3.2-1b.txt"
