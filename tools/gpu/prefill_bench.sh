#!/usr/bin/env bash
# Issue 14's device call: prefill tests, kernel and GEMM timings, then graphserve prefill latency
# beside HF SDPA on the same shapes. Runs on the GPU machine from a folder packed by
# tools/gpu/pack.sh (bin/, lib/, shared/) with this script, hf_prefill.py and hf_peer.py copied in:
#   device run, kind nvidia-h200, carry [".gpu-prefill"], command: bash .gpu-prefill/prefill_bench.sh
# Logs go to $OUT; a short table is printed last.
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$pack/logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared GRAPHSERVE_LOG_LEVEL=warn PYTHONUNBUFFERED=1
gs=$pack/bin/graphserve
lens=${GS_PREFILL_LENS:-128 512 2048 8192}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader

if command -v cuobjdump >/dev/null; then
  echo "== SASS of the prefill kernel: $(cuobjdump -sass -fun prefill_attention_kernel "$pack/bin/gs_test_cuda" 2>/dev/null \
    | grep -oE 'HMMA|LDSM|LDGSTS|LDL|STL' | sort | uniq -c | tr '\n' ' ')"
fi

echo "== tests (${GS_TEST_FILTER:-*})"
timeout 400 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="${GS_TEST_FILTER:-*}" >"$out/tests.log" 2>&1
echo "exit $?"; grep -E '^\[  FAILED|^\[  PASSED|^\[==========\]|Failure' "$out/tests.log" | head -30

echo "== kernel and GEMM timings"
GS_CUDA_BENCH=1 timeout 200 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='PrefillBench.*' 2>&1 \
  | tee "$out/kernels.log" | grep -E '^\[prefill\]|Failure'

echo "== graphserve bench latency (llama3.2-1b dummy, bs 1)"
for n in $lens; do
  timeout 200 "$gs" bench latency --load-format dummy --preset llama3.2-1b --batch-size 1 --input-len "$n" \
    --output-len 2 --num-iters 5 --num-iters-warmup 2 --max-num-batched-tokens 8192 --max-model-len 8448 \
    --output-json "$out/latency_$n.json" >"$out/latency_$n.log" 2>&1
  echo "graphserve prefill $n: $(grep -oE 'prefill: +[0-9.]+ ms' "$out/latency_$n.log" | tr -s ' ') (exit $?)"
done
if [[ -n "${GS_PREFILL_AB:-}" ]]; then
  for n in $GS_PREFILL_AB; do
    GS_PREFILL_ATTENTION=0 timeout 200 "$gs" bench latency --load-format dummy --preset llama3.2-1b --batch-size 1 \
      --input-len "$n" --output-len 2 --num-iters 3 --num-iters-warmup 1 --max-num-batched-tokens 8192 \
      --max-model-len 8448 >"$out/latency_old_$n.log" 2>&1
    echo "graphserve prefill $n, decode kernel: $(grep -oE 'prefill: +[0-9.]+ ms' "$out/latency_old_$n.log" | tr -s ' ')"
  done
fi

echo "== HF SDPA"
timeout 300 python3 "$pack/hf_prefill.py" llama3.2-1b "$(echo $lens | tr ' ' ',')" 2>"$out/hf.err" | tee "$out/hf.log"
tail -3 "$out/hf.err"
