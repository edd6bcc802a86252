#!/usr/bin/env bash
# Issue 30's GPU measurements in one device call (dummy llama3.1-8b unless GS_PRESET says otherwise):
#   cascade  bs 64, every prompt a shared 4k-token system prompt + 256 own tokens: decode ms / step
#            with cascade attention against --disable-cascade-attn (bench latency --shared-prefix-len;
#            the line "cascade attention steps" says whether the backend cascaded at all)
#   ttft     a request whose 4k prefix is cached (only its 16 own tokens computed) against the
#            whole 4112-token prompt cold (bench latency prefill ms, bs 1)
#   chunk    an 8k prompt prefilled in 2k chunks against one pass
#   noreuse  bench throughput on distinct random prompts, prefix caching on (the default) against
#            --no-enable-prefix-caching, alternated twice
#   serve    graphserve serve + bench serve on a prefix-repetition dataset (vLLM's prefix_repetition:
#            4 prefixes of 4000 tokens, 256 own tokens each, byte-level tokenizer), caching on / off
#   ops      one attention layer: bench ops --cases cascade (8B-shape decode over a shared prefix,
#            with and without cascade) and chunked-prefill (an 8k prompt's layer in chunks)
# Pack first (this script is copied into the pack):
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve" GS_GPU_PACK=<repo>/.gpu-prefix tools/gpu/pack.sh build/release
#   cp tools/gpu/prefix_bench.sh <repo>/.gpu-prefix/
#   device run, kind nvidia-h200, carry [".gpu-prefix"], timeout 300, command: bash .gpu-prefix/prefix_bench.sh
# GS_PHASES picks phases (default "ops cascade ttft chunk noreuse serve"), GS_BIN another graphserve
# binary (a same-call baseline). A summary goes to stdout; the logs to $OUT/prefix_logs.tgz.
set -uo pipefail
PACK=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PACK/../gpu-logs}
mkdir -p "$out"
final=$out
out=$(mktemp -d)
trap "tar czf '$final/prefix_logs.tgz' -C '$out' ." EXIT
export LD_LIBRARY_PATH=$PACK/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$PACK/shared GRAPHSERVE_LOG_LEVEL=warn
gs=${GS_BIN:-$PACK/bin/graphserve}
preset=${GS_PRESET:-llama3.1-8b}
model=(--load-format dummy --preset "$preset" --max-model-len 16384)
phases=${GS_PHASES:-ops cascade ttft chunk noreuse serve}
has() { [[ " $phases " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0

# lat LABEL ARGS...: one bench latency run, its summary lines.
lat() {
  local label=$1
  shift
  timeout 240 "$gs" bench latency "${model[@]}" --num-iters 3 --num-iters-warmup 1 "$@" \
    --output-json "$out/lat_$label.json" >"$out/lat_$label.log" 2>&1
  echo "-- $label (exit $?, ${SECONDS} s): $(grep -E '^(prefill|decode / step|every prompt)' "$out/lat_$label.log" \
    | tr -s ' ' | paste -sd ';')"
}

if has ops; then
  echo "== bench ops: cascade, chunked-prefill"
  for c in cascade chunked-prefill; do
    timeout 120 "$gs" bench ops --cases $c >"$out/ops_$c.log" 2>&1
    echo "-- $c (exit $?, ${SECONDS} s)"
    grep -E '^\[(cascade|prefill)\]' "$out/ops_$c.log"
  done
fi
if has cascade; then
  echo "== bs 64, shared 4096-token prefix + 256 own tokens: decode with and without cascade attention"
  lat cascade --batch-size 64 --shared-prefix-len 4096 --input-len 256 --output-len 64
  lat no_cascade --batch-size 64 --shared-prefix-len 4096 --input-len 256 --output-len 64 --disable-cascade-attn
fi
if has ttft; then
  echo "== TTFT, bs 1: 4096 cached + 16 own tokens against 4112 cold"
  lat ttft_cached --batch-size 1 --shared-prefix-len 4096 --input-len 16 --output-len 2
  lat ttft_cold --batch-size 1 --input-len 4112 --output-len 2
fi
if has chunk; then
  echo "== an 8192-token prompt: 2048-token chunks against one pass"
  lat chunks_2k --batch-size 1 --input-len 8192 --output-len 2 --max-num-batched-tokens 2048
  lat one_pass --batch-size 1 --input-len 8192 --output-len 2 --max-num-batched-tokens 8192
fi
if has noreuse; then
  echo "== no reuse (distinct random prompts), bench throughput: prefix caching on / off, twice"
  for round in 1 2; do
    for mode in on off; do
      flag=()
      [[ $mode == off ]] && flag=(--no-enable-prefix-caching)
      timeout 200 "$gs" bench throughput "${model[@]}" "${flag[@]}" --num-prompts 256 --input-len 512 \
        --output-len 128 --output-json "$out/tput_${mode}_$round.json" >"$out/tput_${mode}_$round.log" 2>&1
      echo "-- caching $mode, round $round (exit $?, ${SECONDS} s): $(grep -E '^elapsed' "$out/tput_${mode}_$round.log" \
        | tr -s ' ' | paste -sd ';')"
    done
  done
fi
if has serve; then
  echo "== bench serve, prefix-repetition dataset (4 prefixes x 4000 tokens, 256 own, 128 out): caching on / off"
  python3 - "$out/prefix_repetition.jsonl" <<'PY'
import json, random, string, sys
rng = random.Random(0)
word = lambda n: "".join(rng.choice(string.ascii_lowercase) for _ in range(n))
prefixes = [word(4000) for _ in range(4)]
with open(sys.argv[1], "w") as f:
    for i in range(128):
        f.write(json.dumps({"prompt": prefixes[i % 4] + word(256)}) + "\n")
PY
  port=8031
  for mode in on off; do
    flag=()
    [[ $mode == off ]] && flag=(--no-enable-prefix-caching)
    "$gs" serve "${model[@]}" "${flag[@]}" --port $port --max-num-seqs 64 >"$out/serve_$mode.log" 2>&1 &
    server=$!
    for _ in $(seq 240); do
      python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && break
      sleep 0.5
    done
    timeout 150 "$gs" bench serve --base-url "http://127.0.0.1:$port" --dataset-name custom \
      --dataset-path "$out/prefix_repetition.jsonl" --num-prompts 128 --output-len 128 --max-concurrency 32 \
      --output-json "$out/serve_$mode.json" >"$out/bench_serve_$mode.log" 2>&1
    echo "-- caching $mode (exit $?, ${SECONDS} s): $(grep -iE 'TTFT|throughput' "$out/bench_serve_$mode.log" \
      | tr -s ' ' | paste -sd ';')"
    python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
      2>/dev/null | grep -E '^(vllm:prefix_cache|graphserve_cascade)' | tr '\n' ' '
    echo
    kill -TERM $server
    wait $server
  done
fi
echo "done in ${SECONDS} s"
