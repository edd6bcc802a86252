#!/usr/bin/env bash
# Issues 14 and 8 in one device call: GPU tests, prefill latency beside HF SDPA (with A/B
# variants), per-kernel time of one 8k prefill (ncu), `bench serve` TTFT at 2k and 8k prompts,
# `bench graphs` decode steps and graph memory beside the HF peer, generate's start-up log.
# Runs from a folder packed by tools/gpu/pack.sh (bin/, lib/, shared/ with stories260K and
# golden/stories260K) with this script, hf_prefill.py, ncu_summary.py and
# ../shared/tools/hf_peer.py copied in:
#   GRAPHSERVE_SHARED=../shared GS_GPU_NO_BUILD=1 GS_GPU_PACK=.gpu-kernels bash tools/gpu/pack.sh build/release
#   cp -r ../shared/golden/stories260K .gpu-kernels/shared/golden/   (then the four files above)
#   device run, kind nvidia-h200, carry [".gpu-kernels"],
#   command: KB_SOURCE_DIR=<this checkout's absolute path> bash .gpu-kernels/kernels_bench.sh
# KB_PHASES picks phases (default: all of "tests prefill big serve graphs splits peer ncu", in that order);
# logs go to one archive, $OUT/kernels_logs.tgz, and a summary to stdout. KB_SOURCE_DIR: the
# checkout the test binary was built in (its tests/data paths are compiled in); when that path is
# missing on the device, it is linked to the repository copy the device runs in.
set -uo pipefail
PACK=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/gpu/env.sh
source "$PACK/../tools/gpu/env.sh"
archive_logs kernels_logs
link_source_dir "${KB_SOURCE_DIR:-}"
export GRAPHSERVE_LOG_LEVEL=warn PYTHONUNBUFFERED=1
phases=${KB_PHASES:-tests prefill big serve graphs splits peer ncu}
has() { [[ " $phases " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
SECONDS=0

if has tests; then
  echo "== gs_test_cuda (${GS_TEST_FILTER:-*})"
  timeout 420 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="${GS_TEST_FILTER:-*}" >"$out/tests.log" 2>&1
  echo "exit $? (${SECONDS} s)"
  grep -E '^\[  FAILED|^\[  PASSED|^\[==========\]|Failure' "$out/tests.log" | head -30
fi

# latency LABEL PRESET N [VAR=value ...]: graphserve prefill ms of one N-token prompt.
latency() {
  local label=$1 preset=$2 n=$3
  shift 3
  local log=$out/latency_${preset}_${label}_$n.log
  env "$@" timeout 200 "$gs" bench latency --load-format dummy --preset "$preset" --batch-size 1 --input-len "$n" \
    --output-len 2 --num-iters 5 --num-iters-warmup 2 --max-num-batched-tokens 8192 --max-model-len 8448 \
    --output-json "$out/latency_${preset}_${label}_$n.json" >"$log" 2>&1
  echo "graphserve $preset prefill $n ($label${*:+: $*}): $(grep -oE 'prefill: +[0-9.]+ ms' "$log" | tr -s ' ')"
}

if has prefill; then
  echo "== prefill kernels (PrefillBench)"
  GS_CUDA_BENCH=1 timeout 120 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='PrefillBench.*' 2>&1 |
    tee "$out/prefill_kernels.log" | grep -E '^\[prefill\]|Failure'
  echo "== graphserve bench latency (llama3.2-1b dummy, bs 1)"
  for n in 128 512 2048 8192; do latency default llama3.2-1b "$n"; done
  echo "== HF SDPA (${SECONDS} s)"
  OUT=$out timeout 300 python3 "$pack/hf_prefill.py" llama3.2-1b 128,512,2048,8192 2>"$out/hf.err" | tee -a "$out/hf.log"
  tail -2 "$out/hf.err"
fi

if has big; then
  echo "== llama3.1-8b prefill beside HF (${SECONDS} s)"
  for n in 2048 8192; do latency default llama3.1-8b "$n"; done
  OUT=$out timeout 200 python3 "$pack/hf_prefill.py" llama3.1-8b 2048,8192 2>>"$out/hf.err" | tee -a "$out/hf.log"
fi

if has serve; then
  echo "== bench serve TTFT, llama3.2-1b dummy, 2k and 8k random prompts, concurrency 1 (${SECONDS} s)"
  port=8011
  "$gs" serve --load-format dummy --preset llama3.2-1b --port $port --max-model-len 8448 \
    --max-num-batched-tokens 8192 >"$out/serve.log" 2>&1 &
  server=$!
  get() { python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1]).read().decode())" "$1"; }
  for _ in $(seq 120); do get "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.5; done
  for n in 2048 8192; do
    timeout 120 "$gs" bench serve --base-url "http://127.0.0.1:$port" --num-prompts 10 --input-len $n \
      --output-len 16 --max-concurrency 1 --output-json "$out/serve_ttft_$n.json" >"$out/serve_ttft_$n.log" 2>&1
    echo "-- input $n: $(grep -E 'ttft|Failed' "$out/serve_ttft_$n.log" | tr -s ' ' | tr '\n' ';')"
  done
  kill -TERM $server
  wait $server
fi

if has graphs; then
  echo "== bench graphs (NONE, FULL_AND_PIECEWISE; prompt 128) (${SECONDS} s)"
  sweep="--modes NONE FULL_AND_PIECEWISE --input-len 128 --output-len 32 --num-iters 5 --max-num-batched-tokens 4096"
  "$gs" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1 32 128 $sweep \
    --output-json "$out/graphs_llama3.2-1b.json" --output-png '' >"$out/graphs_llama3.2-1b.log" 2>&1
  "$gs" bench graphs --load-format dummy --preset smollm2-135m --batch-sizes 1 128 $sweep \
    --output-json "$out/graphs_smollm2-135m.json" --output-png '' >"$out/graphs_smollm2-135m.log" 2>&1
  python3 - "$out" <<'EOF'
import json, sys
for m in ("llama3.2-1b", "smollm2-135m"):
    d = json.load(open(f"{sys.argv[1]}/graphs_{m}.json"))
    for r in d["results"]:
        print(f"{m} {r['mode']:<19} bs {r['batch_size']:>3}: {r['decode_ms_median']:.3f} ms/step, "
              f"graph memory {r['graph_memory_bytes'] / 2**20:.1f} MiB, {r['num_graphs']} graphs")
EOF
  echo "== A/B on llama3.2-1b FULL_AND_PIECEWISE: tensor-core decode attention, fused decode GEMVs"
  for v in GS_TC_DECODE=0 GS_DECODE_FUSION=0; do
    env $v "$gs" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1 32 128 \
      --modes FULL_AND_PIECEWISE --input-len 128 --output-len 32 --num-iters 5 --max-num-batched-tokens 4096 \
      --output-json "$out/graphs_ab_${v%%=*}.json" --output-png '' >"$out/graphs_ab_${v%%=*}.log" 2>&1
    python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    print(f\"$v bs {r['batch_size']:>3}: {r['decode_ms_median']:.3f} ms/step\")" "$out/graphs_ab_${v%%=*}.json"
  done
  echo "== generate start-up: graph memory by mode, PDL on / off"
  for pdl in 1 0; do
    GS_CUDA_PDL=$pdl "$gs" --log-level info generate --load-format dummy --preset llama3.2-1b --prompt Hello \
      --max-tokens 16 --ignore-eos --temperature 0 >"$out/generate_pdl$pdl.log" 2>&1
    echo "GS_CUDA_PDL=$pdl: $(grep -E 'graph memory' "$out/generate_pdl$pdl.log" | sed 's/.*\] //')"
  done
fi

if has splits; then
  echo "== flash-decoding splits: default (16 per context, 256 CTAs) vs GS_MAX_SPLITS=64 GS_SPLIT_TARGET=512 (${SECONDS} s)"
  for v in "" "GS_MAX_SPLITS=64 GS_SPLIT_TARGET=512"; do
    tag=${v:+wide}
    for n in 128 2048 8192; do latency "splits${tag:-default}" llama3.2-1b "$n" $v >/dev/null; done
    echo "${v:-default splits}: decode step at context 128 / 2k / 8k: $(for n in 128 2048 8192; do
      grep -oE 'decode / step: +[0-9.]+' "$out/latency_llama3.2-1b_splits${tag:-default}_$n.log" | grep -oE '[0-9.]+$'
    done | tr '\n' ' ')ms"
    for m in llama3.2-1b smollm2-135m; do
      env $v "$gs" bench graphs --load-format dummy --preset $m --batch-sizes 1 8 --modes FULL_AND_PIECEWISE \
        --input-len 128 --output-len 32 --num-iters 5 --max-num-batched-tokens 4096 \
        --output-json "$out/graphs_splits${tag:-default}_$m.json" --output-png '' >/dev/null 2>&1
      python3 -c "
import json, sys
print(sys.argv[2], ', '.join(f\"bs {r['batch_size']} {r['decode_ms_median']:.3f} ms\" for r in json.load(open(sys.argv[1]))['results']))
" "$out/graphs_splits${tag:-default}_$m.json" "$m F&P prompt 128:"
    done
  done
fi

if has peer; then
  echo "== HF peer (static cache + one CUDA graph per step) (${SECONDS} s)"
  OUT=$out timeout 300 python3 "$pack/hf_peer.py" llama3.2-1b,smollm2-135m graph 1,32,128 2>"$out/peer.err" |
    grep -E '^\{' | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['model'], r['variant'], 'bs', r['bs'], r.get('ms_per_step', r.get('error')))"
fi
if has ncu && command -v ncu >/dev/null; then
  echo "== ncu: kernels of one eager 8192-token prefill (${SECONDS} s)"
  timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/ncu.csv" \
    "$gs" bench latency --load-format dummy --preset llama3.2-1b --batch-size 1 --input-len 8192 \
    --output-len 2 --num-iters 1 --num-iters-warmup 0 --max-num-batched-tokens 8192 --max-model-len 8448 \
    --enforce-eager >"$out/ncu_run.log" 2>&1
  echo "ncu exit $?"
  python3 "$pack/ncu_summary.py" "$out/ncu.csv" 14 2>&1 | tee "$out/ncu_summary.txt"
fi

echo "== done (${SECONDS} s)"
