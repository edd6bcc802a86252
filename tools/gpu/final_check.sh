#!/usr/bin/env bash
# The merged tree's GPU check in one device call (after GS_GPU_NO_BUILD=1 GS_GPU_GOLDEN=1 tools/gpu/pack.sh
# build/release): every GPU test, then bench graphs on llama3.2-1b (NONE vs FULL_AND_PIECEWISE, greedy and sampled).
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/final_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$PWD/.gpu/shared GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
export GS_FAMILY_FIXTURES=$PWD/tests/data/families
gs=.gpu/bin/graphserve
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 420 .gpu/bin/gs_test_cuda --gtest_color=no >"$out/tests.log" 2>&1
echo "== gs_test_cuda: exit $?"
grep -E '^\[  (FAILED|PASSED) |^\[==========\]' "$out/tests.log" | tail -n 20
common="--load-format dummy --preset llama3.2-1b --batch-sizes 1 8 32 128 --input-len 128 --output-len 32 --num-iters 5 --output-png ''"
eval "$gs bench graphs $common --modes NONE FULL_AND_PIECEWISE --output-json $out/graphs_greedy.json" >"$out/bench.log" 2>&1
eval "$gs bench graphs $common --modes FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50 --output-json $out/graphs_sampled.json" >>"$out/bench.log" 2>&1
grep -vE '^\[20' "$out/bench.log" | tail -n 30
"$gs" --log-level info generate --load-format dummy --preset llama3.2-1b --prompt Hello --max-tokens 16 --ignore-eos \
  --temperature 0 2>&1 >/dev/null | grep -iE 'graph memory|captured' | tail -n 3
