#!/usr/bin/env bash
# Issue 14's device call: prefill tests, kernel and GEMM timings, then graphserve prefill latency
# beside HF SDPA on the same shapes. Runs on the GPU machine from a folder packed by
# tools/gpu/pack.sh (bin/, lib/, shared/) with this script, hf_prefill.py and hf_peer.py copied in:
#   device run, kind nvidia-h200, carry [".gpu-prefill"], command: bash .gpu-prefill/prefill_bench.sh
# Logs go to one archive, $OUT/prefill_logs.tgz (the device tool returns at most 8 files).
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
final=${OUT:-$pack/logs}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/prefill_logs.tgz" -C "$out" .' EXIT
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared GRAPHSERVE_LOG_LEVEL=warn PYTHONUNBUFFERED=1
gs=$pack/bin/graphserve
lens=${GS_PREFILL_LENS:-128 512 2048 8192}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader

if command -v cuobjdump >/dev/null; then
  echo "== SASS of the prefill kernels: $(cuobjdump -sass "$pack/bin/gs_test_cuda" 2>/dev/null \
    | awk '/Function :/{on = /prefill_attention_kernel/} on' | grep -oE 'HMMA[.0-9A-Z]*|LDSM[.0-9A-Z]*|LDGSTS|LDL|STL' \
    | sort | uniq -c | tr -s ' \n' ' ')"
fi

echo "== tests (${GS_TEST_FILTER:-*})"
timeout 400 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="${GS_TEST_FILTER:-*}" >"$out/tests.log" 2>&1
echo "exit $?"; grep -E '^\[  FAILED|^\[  PASSED|^\[==========\]|Failure' "$out/tests.log" | head -30

echo "== kernel and GEMM timings"
GS_CUDA_BENCH=1 timeout 200 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='PrefillBench.*' 2>&1 \
  | tee "$out/kernels.log" | grep -E '^\[prefill\]|Failure'

# latency LABEL N [VAR=value ...]: graphserve prefill ms at N prompt tokens under those variables
# (model: $preset, default llama3.2-1b).
preset=llama3.2-1b
latency() {
  local label=$1 n=$2
  shift 2
  env "$@" timeout 200 "$gs" bench latency --load-format dummy --preset "$preset" --batch-size 1 --input-len "$n" \
    --output-len 2 --num-iters 5 --num-iters-warmup 2 --max-num-batched-tokens "${chunk:-8192}" --max-model-len 8448 \
    --output-json "$out/latency_${preset}_${label}_$n.json" >"$out/latency_${preset}_${label}_$n.log" 2>&1
  local log=$out/latency_${preset}_${label}_$n.log
  echo "graphserve $preset prefill $n ($label${*:+: $*}): $(grep -oE 'prefill: +[0-9.]+ ms' "$log" | tr -s ' ')"
}
echo "== graphserve bench latency (llama3.2-1b dummy, bs 1)"
for n in $lens; do latency default "$n"; done
# Variants, e.g. GS_PREFILL_VARIANTS="mt2:GS_PREFILL_MT=2 old:GS_PREFILL_ATTENTION=0" GS_PREFILL_VARIANT_LENS="2048"
for v in ${GS_PREFILL_VARIANTS:-}; do
  for n in ${GS_PREFILL_VARIANT_LENS:-2048 8192}; do latency "${v%%:*}" "$n" "${v#*:}"; done
done

# GS_PREFILL_CHUNK=C: the 8k prompt again in chunks of C tokens (chunked prefill over the paged cache).
if [[ -n "${GS_PREFILL_CHUNK:-}" ]]; then
  chunk=$GS_PREFILL_CHUNK latency "chunk$GS_PREFILL_CHUNK" 8192
fi

# GS_PREFILL_NCU=N: per-kernel GPU time of one eager N-token prefill (and one decode step) under ncu.
if [[ -n "${GS_PREFILL_NCU:-}" ]] && command -v ncu >/dev/null; then
  echo "== ncu: kernels of one eager $GS_PREFILL_NCU-token prefill"
  timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/ncu.csv" \
    "$gs" bench latency --load-format dummy --preset llama3.2-1b --batch-size 1 --input-len "$GS_PREFILL_NCU" \
    --output-len 2 --num-iters 1 --num-iters-warmup 0 --max-num-batched-tokens 8192 --max-model-len 8448 \
    --enforce-eager >"$out/ncu_run.log" 2>&1
  echo "ncu exit $?"
  python3 "$pack/ncu_summary.py" "$out/ncu.csv" 22 2>&1 | tee "$out/ncu_summary.txt"
fi

# GS_PREFILL_EXTRA=1: llama3.1-8b at 2k and 8k beside HF, and 32 prompts of 1,024 tokens in one
# bench throughput run (prefill tokens/s).
if [[ -n "${GS_PREFILL_EXTRA:-}" ]]; then
  echo "== llama3.1-8b and throughput"
  preset=llama3.1-8b
  for n in 2048 8192; do latency default "$n"; done
  preset=llama3.2-1b
  timeout 200 "$gs" bench throughput --load-format dummy --preset llama3.2-1b --num-prompts 32 --input-len 1024 \
    --output-len 2 --max-num-batched-tokens 8192 --max-model-len 8448 --output-json "$out/throughput.json" \
    >"$out/throughput.log" 2>&1
  tail -n 6 "$out/throughput.log"
  OUT=$out timeout 200 python3 "$pack/hf_prefill.py" llama3.1-8b 2048,8192 2>>"$out/hf.err" | tee -a "$out/hf.log"
fi

echo "== HF SDPA"
OUT=$out timeout 300 python3 "$pack/hf_prefill.py" llama3.2-1b "$(echo $lens | tr ' ' ',')" 2>"$out/hf.err" \
  | tee -a "$out/hf.log"
tail -3 "$out/hf.err"
