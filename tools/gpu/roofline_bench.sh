#!/usr/bin/env bash
# Issue 8 items 3 and 4 in one device call. Parts (arguments; default: all but tc):
#   probe    what an instantiated graph costs (roofline_graph_mem, one process per measurement)
#   tests    the GPU tests of the memory plan, the GEMM tuning cache and the graph modes
#   startup  generate on llama3.2-1b with a cold, then a warm GEMM cache, then untuned
#   util     --gpu-memory-utilization 0.95, 1.0 (KV cache takes all but the graph reserve), 0.01 (error)
#   models   graph memory of smollm2-135m, qwen3-0.6b, llama3.1-8b (and smollm2 with dense piecewise graphs)
#   ab       decode (bench graphs) and prefill (bench latency) A/Bs on llama3.2-1b:
#              old = GS_DENSE_PIECEWISE=1 GS_GEMM_AUTOTUNE=0 (main: every capture size piecewise, heuristic GEMMs)
#              lad = GS_GEMM_AUTOTUNE=0 (the sparse piecewise ladder alone);  new = defaults (ladder + tuned GEMMs)
#   tc       the tensor-core decode threshold A/B (GS_TC_DECODE_MIN_PAIRS), prompt 128
#   tclong   the same at prompt 4096 (where flash-decoding's context splits matter)
#   final    decode at the default threshold, prompt 128 and 4096, llama3.2-1b and smollm2-135m
# Packed by tools/gpu/pack.sh into .gpu-roofline/ with this script as run.sh and roofline_graph_mem (nvcc):
#   device run, kind nvidia-h200, carry [".gpu-roofline"], command: bash .gpu-roofline/run.sh [PART...]
set -uo pipefail
parts=" ${*:-probe tests startup util models ab} "
has() { [[ $parts == *" $1 "* ]]; }
PACK=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/gpu/env.sh
source "$PACK/../tools/gpu/env.sh"
archive_logs roofline_logs
export GRAPHSERVE_LOG_LEVEL=info
cache=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ms_now() { echo $(($(date +%s%N) / 1000000)); }

if has probe; then
  echo "== graph memory probe (200 graphs a process)"
  for n in 1 8 32 140 280; do timeout 30 "$pack/bin/roofline_graph_mem" "$n" kept; done
  for v in destroyed upload priority device; do timeout 30 "$pack/bin/roofline_graph_mem" 140 "$v"; done
fi

if has tests; then
  echo "== tests"
  timeout 200 "$pack/bin/gs_test_cuda" --gtest_color=no \
    --gtest_filter='CudaMemoryPlan.*:CudaGemmTuning.*:CudaModel.*:CudaSpecVerify.*:CudaGraph.*:Shapes/CudaAttentionTest.*' >"$out/tests.log" 2>&1
  echo "exit $?"; grep -E '^\[  FAILED|^\[  PASSED|^\[==========\]|Failure' "$out/tests.log" | head -20
fi

# gen LABEL PRESET [args...]: one generate, wall time and its memory / graph / tuning log lines.
gen() {
  local label=$1 preset=$2
  shift 2
  local t0 rc
  t0=$(ms_now)
  timeout 120 "$gs" generate --load-format dummy --preset "$preset" --prompt Hello --max-tokens 8 --ignore-eos \
    --temperature 0 -cc.cache_dir="$cache" "$@" >"$out/gen_$label.out" 2>"$out/gen_$label.log"
  rc=$?
  echo "generate $label ($preset $*): exit $rc, $(($(ms_now) - t0)) ms wall"
  grep -hoE 'GEMM autotune: .* s;|graph memory [0-9.]+ MiB \(PIECEWISE [0-9.]+, FULL [0-9.]+; [0-9.]+ MiB reserved\)|captured [0-9]+ graphs|memory plan: .*|error.*' \
    "$out/gen_$label.log" | sed 's/^/    /' | head -6
}
if has startup; then
  echo "== start-up, llama3.2-1b (cold, then warm GEMM cache, then untuned)"
  gen cold llama3.2-1b
  gen warm llama3.2-1b
  GS_GEMM_AUTOTUNE=0 gen untuned llama3.2-1b
fi
if has util; then
  echo "== --gpu-memory-utilization"
  for u in 0.95 1.0 0.01; do gen "util$u" llama3.2-1b --gpu-memory-utilization "$u"; done
fi
if has models; then
  echo "== graph memory per model (default capture sizes, FULL_AND_PIECEWISE)"
  for p in smollm2-135m qwen3-0.6b llama3.1-8b; do gen "mem_$p" "$p"; done
  GS_DENSE_PIECEWISE=1 GS_GEMM_AUTOTUNE=0 gen mem_dense_smollm2 smollm2-135m
fi

if has ab; then
  echo "== bench graphs llama3.2-1b FULL_AND_PIECEWISE (decode ms/step)"
  bg() {
    local label=$1
    shift
    env "$@" timeout 150 "$gs" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1 8 32 128 \
      --input-len 128 --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE -cc.cache_dir="$cache" \
      --output-json "$out/graphs_$label.json" >"$out/graphs_$label.log" 2>&1
    echo "$label: $(grep -E '^FULL_AND_PIECEWISE +[0-9]+ ' "$out/graphs_$label.log" | awk '{printf "bs %s %s ms; ", $2, $3}')"
    grep -E 'graph memory' "$out/graphs_$label.log" | grep -v '^\[' | sed 's/^/    /'
  }
  bg old GS_DENSE_PIECEWISE=1 GS_GEMM_AUTOTUNE=0
  bg lad GS_GEMM_AUTOTUNE=0
  bg new
  bg old2 GS_DENSE_PIECEWISE=1 GS_GEMM_AUTOTUNE=0
  bg new2

  echo "== bench latency llama3.2-1b bs 1: mixed (piecewise) prefill steps and long prefills"
  lat() {
    local label=$1 n=$2
    shift 2
    env "$@" timeout 120 "$gs" bench latency --load-format dummy --preset llama3.2-1b --batch-size 1 --input-len "$n" \
      --output-len 2 --num-iters 20 --num-iters-warmup 3 --max-num-batched-tokens 8192 --max-model-len 8448 \
      -cc.cache_dir="$cache" ${cc:-} >"$out/lat_${label}_$n.log" 2>&1
    echo "prefill $n $label: $(grep -oE 'prefill: +[0-9.]+ ms' "$out/lat_${label}_$n.log" | tr -s ' ')"
  }
  for n in 100 200; do
    lat old "$n" GS_DENSE_PIECEWISE=1 GS_GEMM_AUTOTUNE=0
    lat lad "$n" GS_GEMM_AUTOTUNE=0
    lat new "$n"
  done
  for n in 2048 8192; do
    lat untuned "$n" GS_GEMM_AUTOTUNE=0
    cc="-cc.compile_sizes=[$n]" lat tuned "$n"
  done
fi

# tc PRESET THRESHOLD BS...: bench graphs decode ms/step under GS_TC_DECODE_MIN_PAIRS=THRESHOLD (prompt $input_len).
tc() {
  local preset=$1 t=$2
  shift 2
  GS_TC_DECODE_MIN_PAIRS=${t/default/} timeout 120 "$gs" bench graphs --load-format dummy --preset "$preset" --batch-sizes "$@" \
    --input-len "${input_len:-128}" --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE -cc.cache_dir="$cache" \
    --max-num-batched-tokens 8192 >"$out/tc_${preset}_${t}_${input_len:-128}.log" 2>&1
  echo "$preset prompt ${input_len:-128} pairs >= $t: $(grep -E '^FULL_AND_PIECEWISE +[0-9]+ ' \
    "$out/tc_${preset}_${t}_${input_len:-128}.log" | awk '{printf "bs %s %s; ", $2, $3}')"
}
if has tc; then
  echo "== tensor-core decode threshold A/B (decode ms/step, FULL_AND_PIECEWISE)"
  for t in 256 64 32 256; do tc llama3.2-1b "$t" 2 4 8 16 32; done
  for t in 256 64; do tc smollm2-135m "$t" 8 16 32 64 128; done
fi
if has tclong; then
  echo "== tensor-core decode threshold A/B at prompt 4096"
  for t in 256 64 32; do input_len=4096 tc llama3.2-1b "$t" 4 8 16; done
fi
if has final; then
  echo "== decode at the defaults (GS_TC_DECODE_MIN_PAIRS unset: the built-in threshold)"
  for n in 128 4096; do
    input_len=$n tc llama3.2-1b default 1 4 8 16 32 128
    input_len=$n tc smollm2-135m default 1 16 32 64 128
  done
fi
