#!/usr/bin/env bash
# Issue 14's device call: GPU tests, prefill kernel and GEMM timings, graphserve prefill latency
# beside HF SDPA on the same shapes (with A/B variants), chunked prefill, bench serve TTFT, decode
# steps beside a prefill chunk, llama3.1-8b and bench throughput. Runs on the GPU machine from a
# folder packed by tools/gpu/pack.sh (bin/, lib/, shared/ with stories260K and golden/stories260K)
# with this script, hf_prefill.py and ../shared/tools/hf_peer.py copied in:
#   GRAPHSERVE_SHARED=../shared GS_GPU_NO_BUILD=1 GS_GPU_PACK=<repo>/.gpu-prefill bash tools/gpu/pack.sh build/release
#   mkdir -p <repo>/.gpu-prefill/shared/golden && cp -r ../shared/golden/stories260K <repo>/.gpu-prefill/shared/golden/
#   (the CudaModel tests read golden/stories260K; without it three of them fail on a missing JSON file)
#   device run, kind nvidia-h200, carry [".gpu-prefill"],
#   command: GS_SOURCE_DIR=<this checkout's absolute path> bash .gpu-prefill/prefill_bench.sh
# GS_PHASES picks phases (default "tests kernels latency chunk serve mixed big hf"); logs go to one
# archive, $OUT/prefill_logs.tgz (the device tool returns at most 8 files), a summary to stdout.
# If a PrefillAttention test fails, those tests run again with GS_PREFILL_QRELOAD=1 (the wgmma
# kernel reloading Q per tile); the rest runs with it if they pass, else with GS_PREFILL_WGMMA=0 (the
# mma.sync kernel), and says so.
set -uo pipefail
PACK=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/gpu/env.sh
source "$PACK/../tools/gpu/env.sh"
archive_logs prefill_logs
export GRAPHSERVE_LOG_LEVEL=warn PYTHONUNBUFFERED=1
lens=${GS_PREFILL_LENS:-128 512 2048 8192}
phases=${GS_PHASES:-tests kernels latency chunk serve mixed big hf}
has() { [[ " $phases " == *" $1 "* ]]; }
link_source_dir "${GS_SOURCE_DIR:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
SECONDS=0

if command -v cuobjdump >/dev/null; then
  echo "== SASS of the prefill kernels: $(cuobjdump -sass "$pack/bin/gs_test_cuda" 2>/dev/null \
    | awk '/Function :/{on = /prefill_attention_kernel/} on' \
    | grep -oE 'HGMMA[.0-9A-Z]*|HMMA[.0-9A-Z]*|LDSM[.0-9A-Z]*|LDGSTS|LDL|STL' | sort | uniq -c | tr -s ' \n' ' ')"
fi

if has tests; then
  echo "== gs_test_cuda (${GS_TEST_FILTER:-*})"
  timeout 300 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="${GS_TEST_FILTER:-*}" >"$out/tests.log" 2>&1
  echo "exit $? (${SECONDS} s)"
  grep -E '^\[  FAILED|^\[  PASSED|^\[==========\]|Failure' "$out/tests.log" | head -30
  if grep -qE '^\[  FAILED  \] PrefillAttention\.' "$out/tests.log"; then
    GS_PREFILL_QRELOAD=1 timeout 200 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='PrefillAttention.*' \
      >"$out/tests_qreload.log" 2>&1
    if [[ $? == 0 ]]; then
      echo "!! a PrefillAttention test failed; they pass with GS_PREFILL_QRELOAD=1: the rest runs with it"
      export GS_PREFILL_QRELOAD=1
    else
      echo "!! a PrefillAttention test failed, also with GS_PREFILL_QRELOAD=1: the rest runs with GS_PREFILL_WGMMA=0"
      export GS_PREFILL_WGMMA=0
    fi
  fi
fi

if has kernels; then
  echo "== kernel and GEMM timings (${SECONDS} s)"
  GS_CUDA_BENCH=1 timeout 120 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='PrefillBench.*' 2>&1 \
    | tee "$out/kernels.log" | grep -E '^\[prefill\]|Failure'
fi

# latency LABEL N [VAR=value ...]: graphserve prefill ms at N prompt tokens under those variables
# (model: $preset, default llama3.2-1b; step budget: $chunk, default 8192).
preset=llama3.2-1b
latency() {
  local label=$1 n=$2
  shift 2
  local log=$out/latency_${preset}_${label}_$n.log
  env "$@" timeout 200 "$gs" bench latency --load-format dummy --preset "$preset" --batch-size 1 --input-len "$n" \
    --output-len 2 --num-iters 5 --num-iters-warmup 2 --max-num-batched-tokens "${chunk:-8192}" --max-model-len 8448 \
    --output-json "$out/latency_${preset}_${label}_$n.json" >"$log" 2>&1
  echo "graphserve $preset prefill $n ($label${*:+: $*}): $(grep -oE 'prefill: +[0-9.]+ ms.*' "$log" | tr -s ' ')"
}
if has latency; then
  echo "== graphserve bench latency (llama3.2-1b dummy, bs 1) (${SECONDS} s)"
  for n in $lens; do latency default "$n"; done
  # e.g. GS_PREFILL_VARIANTS="fa2:GS_PREFILL_WGMMA=0 old:GS_PREFILL_ATTENTION=0" (one variable each)
  for v in ${GS_PREFILL_VARIANTS:-fa2:GS_PREFILL_WGMMA=0 qreload:GS_PREFILL_QRELOAD=1}; do
    # shellcheck disable=SC2086
    for n in ${GS_PREFILL_VARIANT_LENS:-2048 8192}; do latency "${v%%:*}" "$n" ${v#*:}; done
  done
fi

# The 8k prompt in 1,024 / 2,048 / 4,096-token chunks (chunked prefill over the paged cache) vs one
# pass, with the runner's step counts (graph mode, padding) of each run.
if has chunk; then
  echo "== chunked prefill (${SECONDS} s)"
  for c in 1024 2048 4096; do
    chunk=$c latency chunk$c 8192 GRAPHSERVE_LOG_LEVEL=info
    grep -oE 'runner: [0-9]+ steps.*' "$out/latency_${preset}_chunk${c}_8192.log" | head -1
  done
fi

serve_start() {  # serve_start BUDGET: a llama3.2-1b dummy server on $port with that step token budget
  port=8011
  "$gs" serve --load-format dummy --preset llama3.2-1b --port $port --max-model-len 8448 \
    --max-num-batched-tokens "$1" >"$out/serve_$1.log" 2>&1 &
  server=$!
  for _ in $(seq 120); do
    python3 -c "import sys, urllib.request as u; u.urlopen(sys.argv[1])" "http://127.0.0.1:$port/health" \
      >/dev/null 2>&1 && break
    sleep 0.5
  done
}
serve_stop() { kill -TERM "$server" && wait "$server"; }
bench_serve() {  # bench_serve NAME ARGS...: bench serve against the running server, log + JSON
  local name=$1
  shift
  timeout 150 "$gs" bench serve --base-url "http://127.0.0.1:$port" --output-json "$out/serve_$name.json" "$@" \
    >"$out/serve_$name.log" 2>&1
}
metric() { grep -E "$2" "$out/serve_$1.log" | tr -s ' ' | tr '\n' ';'; }

if has serve; then
  echo "== bench serve TTFT, llama3.2-1b dummy, 2k and 8k random prompts, concurrency 1 (${SECONDS} s)"
  serve_start 8192
  for n in 2048 8192; do
    bench_serve "ttft_$n" --num-prompts 10 --input-len $n --output-len 16 --max-concurrency 1
    echo "-- input $n: $(metric "ttft_$n" 'ttft|Failed')"
  done
  serve_stop
fi

# Decode steps beside prefill chunks: 16 streams decoding (prompt 128, 256 tokens) alone, then
# again while 8k prompts arrive one at a time and prefill in 2,048-token chunks (budget 2048), so
# about 1 step in 20 carries a chunk: the decode ITL p99 is the step with a chunk.
if has mixed; then
  echo "== decode beside prefill chunks, --max-num-batched-tokens 2048 (${SECONDS} s)"
  serve_start 2048
  decode=(--num-prompts 16 --input-len 128 --output-len 256 --max-concurrency 16)
  bench_serve decode_alone "${decode[@]}"
  echo "-- decode alone: $(metric decode_alone 'itl|tpot')"
  bench_serve decode_mixed "${decode[@]}" &
  dec=$!
  sleep 0.3
  bench_serve chunks_8k --num-prompts 3 --input-len 8192 --output-len 2 --max-concurrency 1
  wait $dec
  echo "-- decode beside chunks: $(metric decode_mixed 'itl|tpot')"
  echo "-- the 8k prompts (chunked, beside the decodes): $(metric chunks_8k 'mean ttft|Failed')"
  serve_stop
fi

# llama3.1-8b at 2k and 8k, and 32 prompts of 1,024 tokens in one bench throughput run.
if has big; then
  echo "== llama3.1-8b and throughput (${SECONDS} s)"
  preset=llama3.1-8b
  for n in 2048 8192; do latency default "$n"; done
  preset=llama3.2-1b
  timeout 200 "$gs" bench throughput --load-format dummy --preset llama3.2-1b --num-prompts 32 --input-len 1024 \
    --output-len 2 --max-num-batched-tokens 8192 --max-model-len 8448 --output-json "$out/throughput.json" \
    >"$out/throughput.log" 2>&1
  echo "throughput 32 x 1024: $(grep -E 'elapsed|tokens/s' "$out/throughput.log" | tail -2 | tr '\n' ' ')"
fi

if has hf; then
  echo "== HF SDPA (${SECONDS} s)"
  OUT=$out timeout 200 python3 "$pack/hf_prefill.py" llama3.2-1b "$(echo $lens | tr ' ' ',')" 2>"$out/hf.err" \
    | tee -a "$out/hf.log"
  if has big && [[ ${GS_HF_BIG:-1} != 0 ]]; then  # GS_HF_BIG=0: no HF llama3.1-8b (about a minute)
    OUT=$out timeout 200 python3 "$pack/hf_prefill.py" llama3.1-8b 2048,8192 2>>"$out/hf.err" | tee -a "$out/hf.log"
  fi
  tail -2 "$out/hf.err"
fi
echo "== done (${SECONDS} s)"
