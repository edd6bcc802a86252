#!/usr/bin/env bash
# Structured output on the GPU: dummy llama3.1-8b (with Llama 3's 128k-token tokenizer, so the
# masks are real), every request under a JSON schema against the same load unconstrained, at
# concurrency 1 and 64, in one call; then the host-side mask benchmark on the same machine.
# Pack with GS_GPU_GOLDEN=1 (the tokenizers come from shared/golden/tokenizers), then from the
# packed folder:  bash structured_bench.sh [PACK_DIR]      (PACK_DIR: default .gpu)
# Compare each constrained TPOT (step time) with the unconstrained one of the same concurrency.
set -uo pipefail
pack=${1:-.gpu}
out=${OUT:-gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
gs=$pack/bin/graphserve
tok=$pack/shared/golden/tokenizers/llama3-8b-instruct
port=8013
# A long string keeps every row under the grammar for all 128 tokens (ignore_eos).
schema='{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"title":{"type":"string","minLength":400},"n":{"type":"integer"}},"required":["title","n"]}}}'
$gs serve --load-format dummy --preset llama3.1-8b --tokenizer "$tok" --port $port --max-num-seqs 128 \
  >"$out/serve_structured.log" 2>&1 &
server=$!
get() { python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1]).read().decode())" "$1"; }
for _ in $(seq 240); do get "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.5; done
for c in 1 64; do
  n=$((c == 1 ? 8 : 128))
  for mode in free schema; do
    extra=()
    [[ $mode == schema ]] && extra=(--extra-body "{\"response_format\": $schema}")
    echo "== llama3.1-8b dummy, concurrency $c, $mode"
    timeout 200 $gs bench serve --base-url "http://127.0.0.1:$port" --num-prompts $n --input-len 128 --output-len 128 \
      --max-concurrency $c "${extra[@]}" --output-json "$out/structured_c${c}_$mode.json" 2>&1 | grep -Ei 'tpot|itl|throughput|failed'
  done
done
kill -TERM $server; wait $server
echo "== host mask benchmark (this machine's CPU), Qwen2.5 vocabulary"
$gs bench structured --tokenizer "$pack/shared/golden/tokenizers/qwen2.5-instruct" --schemas "$pack/schemas.json" \
  --output-json "$out/bench_structured.json" 2>&1 | tail -n 4
