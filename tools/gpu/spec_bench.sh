#!/usr/bin/env bash
# Speculative decoding on the GPU (issue 10) in one device call, after
#   GS_GPU_NO_BUILD=1 GS_GPU_PACK=$PWD/.gpu GS_GPU_TARGETS="graphserve gs_test_cuda" tools/gpu/pack.sh build/release
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/spec_bench.sh
# (GS_GPU_DIR names the packed folder when it is not .gpu; GS_ROOT the checkout when the script
# runs from a copy outside tools/gpu.)
# 1. the GPU tests of verification (one (num_reqs, 1 + k) FULL graph replayed on different contexts
#    against eager) and of the model in every graph mode;
# 2. stories260K, one request, 500 greedy tokens (its context is 512) with n-gram k = 2, 4, 8 and
#    without speculation: ms per output token, acceptance, and whether the text is identical;
# 3. dummy llama3.1-8b: bench latency's decode step at bs 1, 8, 32, plain and as a verification step
#    of k = 4 proposals per request (uniform batches of 5 tokens per request, FULL graphs);
# 4. dummy llama3.1-8b target with a dummy llama3.2-1b draft, k = 4: the draft's proposal time per
#    step (catch-up step + 3 one-token decode steps) at bs 1, 8, 32.
# Logs go to $OUT; a summary is printed last.
set -uo pipefail
cd "${GS_ROOT:-$(dirname "$0")/../..}"
pk=${GS_GPU_DIR:-.gpu}
out=${OUT:-gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/$pk/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$PWD/$pk/shared GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
gs=$pk/bin/graphserve
log=$out/bench.log
sum=$out/summary.txt
: >"$log"
: >"$sum"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$sum"

if [[ -z "${GS_SKIP_TESTS:-}" ]]; then
  timeout 200 $pk/bin/gs_test_cuda --gtest_color=no --gtest_filter='CudaSpecVerify*:CudaModel.Every*' \
    >"$out/tests.log" 2>&1
  echo "gs_test_cuda (CudaSpecVerify*, CudaModel.Every*): exit $?" | tee -a "$sum"
  grep -E '^\[  (FAILED|PASSED) |Failure|proposals accepted' "$out/tests.log" | tail -n 12 | tee -a "$sum"
fi

# 2. stories260K: the same 500 greedy tokens with and without n-gram speculation.
stories="--model $GRAPHSERVE_SHARED/models/stories260K --temperature 0 --ignore-eos --max-tokens 500"
for k in 0 2 4 8; do
  spec=()
  [[ $k -gt 0 ]] && spec=(--speculative-config "{\"method\": \"ngram\", \"num_speculative_tokens\": $k, \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}")
  best=""
  for rep in 1 2 3; do  # the best of three (one request: host noise matters)
    $gs generate $stories --prompt "Once upon a time" "${spec[@]}" >"$out/stories_k$k.txt" 2>"$out/stories_k$k.err"
    t=$(grep -o 'generated in [0-9.]*' "$out/stories_k$k.err" | awk '{print $3}')
    [[ -z $best ]] || awk "BEGIN{exit !($t < $best)}" && best=$t
  done
  cat "$out/stories_k$k.err" >>"$log"
  same=$(cmp -s "$out/stories_k0.txt" "$out/stories_k$k.txt" && echo identical || echo DIFFERENT)
  acc=$(grep -o 'accepted ([0-9.]*%)' "$out/stories_k$k.err" | head -1)
  mal=$(grep -o 'mean acceptance length [0-9.]*' "$out/stories_k$k.err" | head -1)
  echo "stories260K k=$k: $(awk "BEGIN{printf \"%.4f\", $best * 1000 / 500}") ms per output token (best of 3, 500 tokens), ${acc:-no speculation} ${mal}, text $same" | tee -a "$sum"
done

# 3. and 4. on dummy llama3.1-8b (and llama3.2-1b as the draft).
# Decode steps replay FULL graphs (FULL_DECODE_ONLY: only those are captured; prefill is eager).
big="--load-format dummy --preset llama3.1-8b --max-model-len 2048"
decode_only="-cc.cudagraph_mode=FULL_DECODE_ONLY"
k4='{"method": "ngram", "num_speculative_tokens": 4}'
for bs in 1 8 32; do
  plain=$($gs bench latency $big $decode_only "-cc.cudagraph_capture_sizes=[$bs]" --batch-size $bs --input-len 64 \
    --output-len 24 --num-iters 2 2>>"$log" | tee -a "$log" | grep 'decode / step' | awk '{print $4}')
  verify=$($gs bench latency $big $decode_only "-cc.cudagraph_capture_sizes=[$((bs * 5))]" --batch-size $bs \
    --input-len 64 --output-len 24 --num-iters 2 --speculative-config "$k4" 2>>"$log" | tee -a "$log" |
    grep 'decode / step' | awk '{print $4}')
  echo "llama3.1-8b bs $bs: plain decode step $plain ms, verification step (k = 4, $((bs * 5)) tokens) $verify ms" | tee -a "$sum"
done
draft='{"method": "draft_model", "model": "llama3.2-1b", "num_speculative_tokens": 4}'
sizes='-cc.cudagraph_capture_sizes=[1,2,4,5,8,16,32,40,64,160]'
for bs in 1 8 32; do
  prompts=()
  for i in $(seq $bs); do prompts+=(--prompt "Hello $i"); done
  line=$($gs generate $big "$sizes" "${prompts[@]}" --temperature 0 --ignore-eos --max-tokens 32 \
    --speculative-config "$draft" 2>&1 >/dev/null | tee -a "$log" | grep 'speculative decoding:')
  echo "llama3.1-8b + llama3.2-1b draft bs $bs: $(echo "$line" | grep -o 'proposing [0-9.]* ms per step') (k = 4; acceptance $(echo "$line" | grep -o 'accepted ([0-9.]*%)'))" | tee -a "$sum"
done
echo "== summary"
cat "$sum"
