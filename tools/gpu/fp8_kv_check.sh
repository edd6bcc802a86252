#!/usr/bin/env bash
# The FP8 KV cache (issue 27, --kv-cache-dtype fp8) in one device call, from the pack in $PACK
# (default .gpu; binaries may be xz-compressed): the attention tests (the e4m3 cache against the
# CPU reference's, and the bf16 kernels it touched), then decode ms/step at long contexts and an
# 8k prefill with the bf16 cache (auto) and the e4m3 one, and the KV tokens each plan holds.
#   KV_PHASES  parts to run (default "tests ops decode sampled prefill"; ops: `bench ops --cases
#              $KV_OPS`, default decode-attention: one attention layer per cache at 2k / 8k tokens;
#              ab: the 8k prefill on the e4m3 cache (one pass and 2k chunks) by this build and
#              $pack/bin/graphserve.old alternated, and on the bf16 cache by this build)
#   KV_SHAPES  preset:batch,sizes:input_len ... for the decode part
#   (kernels: `bench kernels` of llama3.1-8b at bs 32 after 8k tokens, each cache; not by default)
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/fp8_kv_check.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
link_source_dir "${FC_SOURCE_DIR:-}"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} PYTHONUNBUFFERED=1
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
phases=${KV_PHASES:-tests ops decode sampled prefill}
has() { [[ " $phases " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
SECONDS=0

if has tests; then
  timeout "${KV_TEST_S:-240}" "$pack/bin/gs_test_cuda" --gtest_color=no \
    --gtest_filter="${KV_TEST_FILTER:-*Fp8KvCache*:*CudaAttention*:*PrefillAttention*:*Cascade*:CudaModel.*}" \
    >"$out/tests.log" 2>&1
  echo "== gs_test_cuda: exit $? (${SECONDS} s)"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]|Failure|Expected|Which|rror' "$out/tests.log" | head -n 40
fi
if has ops; then
  echo "== bench ops --cases ${KV_OPS:=decode-attention} (${SECONDS} s)"
  timeout 150 "$gs" bench ops --cases "$KV_OPS" 2>&1 | grep -E '^\[(decode-attention|prefill)|rror'
fi
# decode PRESET BATCH_SIZES INPUT_LEN [args...]: decode ms/step after a prompt of INPUT_LEN.
decode() {
  local preset=$1 bs=$2 len=$3
  shift 3
  GRAPHSERVE_LOG_LEVEL=info timeout 300 "$gs" bench graphs --load-format dummy --preset "$preset" --batch-sizes "$bs" \
    --input-len "$len" --output-len 32 --num-iters 3 --modes FULL_AND_PIECEWISE --max-model-len $((len + 64)) \
    --max-num-batched-tokens 8192 --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^FULL_AND_PIECEWISE +[0-9]|rror|KV cache:' | sed -E 's/^\[[^]]*\] \[[^]]*\] //' |
    awk -v t="$preset" '/KV cache/{print t": "$0; next} {print t, $2, $3}'
}
if has decode; then
  echo "== decode ms/step, FULL_AND_PIECEWISE: bf16 KV (auto) / e4m3 KV (fp8) (${SECONDS} s)"
  for shape in ${KV_SHAPES:-llama3.1-8b:1,32:8192 llama3.2-1b:1,32:8192 llama3.1-8b:1,32,128:128}; do
    IFS=: read -r p bs len <<<"$shape"
    decode "$p" "$bs" "$len" | sed "s/\$/ in $len auto/"
    decode "$p" "$bs" "$len" --kv-cache-dtype fp8 | sed "s/\$/ in $len fp8/"
  done
fi
if has sampled; then
  echo "-- sampled (temperature 1, top-p 0.95)"
  decode llama3.1-8b 32 8192 --temperature 1.0 --top-p 0.95 | sed 's/$/ sampled auto/'
  decode llama3.1-8b 32 8192 --temperature 1.0 --top-p 0.95 --kv-cache-dtype fp8 | sed 's/$/ sampled fp8/'
fi
if has kernels; then
  for kv in auto fp8; do
    echo "== bench kernels llama3.1-8b bs 32 at 8192, kv $kv (${SECONDS} s)"
    timeout 200 "$gs" bench kernels --load-format dummy --preset llama3.1-8b --batch-sizes 32 --input-len 8192 \
      --max-model-len 8256 --max-num-batched-tokens 8192 --top 8 --kv-cache-dtype "$kv" 2>&1 | grep -vE '^\[20' | head -16
  done
fi
if has prefill; then
  echo "== llama3.1-8b prefill of 8192 tokens (${SECONDS} s)"
  for kv in auto fp8; do
    timeout 120 "$gs" bench latency --load-format dummy --preset llama3.1-8b --batch-size 1 --input-len 8192 \
      --output-len 2 --num-iters 3 --num-iters-warmup 1 --max-num-batched-tokens 8192 --max-model-len 8448 \
      --kv-cache-dtype "$kv" 2>&1 | grep -E 'prefill|rror' | head -3 | sed "s/\$/ kv $kv/"
  done
fi
if has ab; then
  echo "== A/B, llama3.1-8b 8k prefill: this build and graphserve.old alternated (${SECONDS} s)"
  for run in "fp8 8192" "fp8 2048" "auto 8192"; do
    read -r kv chunk <<<"$run"
    for bin in "$gs" "$gs.old"; do
      [[ $kv == auto && $bin == "$gs.old" ]] && continue  # the bf16 path is the same in both
      timeout 100 "$bin" bench latency --load-format dummy --preset llama3.1-8b --batch-size 1 --input-len 8192 \
        --output-len 2 --num-iters 3 --num-iters-warmup 1 --max-num-batched-tokens "$chunk" --max-model-len 8448 \
        --kv-cache-dtype "$kv" 2>&1 | grep -E 'prefill|rror' | head -2 | sed "s|\$| $(basename "$bin") kv $kv chunks $chunk|"
    done
  done
fi
echo "== done (${SECONDS} s)"
