#!/usr/bin/env bash
# Issue 34 (non-finite logits) in one device call, run from a packed folder (tools/gpu/pack.sh
# with GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=<repo>/.gpu-harden34, plus this script):
#   device run, kind nvidia-h200, carry [".gpu-harden34"], command: bash .gpu-harden34/nonfinite_check.sh
# The CUDA sampler's tests: rows with NaN / +inf logits or nothing left to sample give the CPU
# reference's sentinels (vocabularies of 1,000 and 151,936; 12 rows on clusters of 8 CTAs and 72
# rows on one CTA each), and every other CudaSampler test still draws what the CPU draws.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-./out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_LOG_LEVEL=warn
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout "${NONFINITE_TEST_TIMEOUT:-120}" bin/gs_test_cuda --gtest_filter='CudaSampler.*' >"$out/cuda_sampler.log" 2>&1
echo "== gs_test_cuda CudaSampler.*: exit $?"
grep -E 'FAILED|PASSED|Failure|OK \]' "$out/cuda_sampler.log" | head -40
