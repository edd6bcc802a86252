#!/usr/bin/env bash
# Issue 27 (FP8 weights) in one device call, beside a baseline binary where the pack has one.
# Pack (here): tools/gpu/pack.sh with GS_GPU_TARGETS="graphserve gs_test_cuda" (optionally an older
# build's graphserve copied to <pack>/bin/graphserve_base); strip the binaries and compress the pack
# under the device tool's 64 MiB; on the device set PACK to it and run this script from the
# repository copy:   PACK=<pack> bash tools/gpu/fp8_check.sh
# FP8_PHASES picks the phases, run in this order (default: tests graphs prefill ops):
#   tests     gs_test_cuda Fp8Kernels.* and SkinnyGemm* (quantization bit-exact vs the host, the FP8
#             linear at every token count, the fused decode epilogues, the deferred norm, the scales
#             applied in the consuming op above the skinny kernel);
#   fixtures  the HF fixtures: FP8 checkpoints vs HF f32, --quantization fp8 vs bf16 beside bf16 vs f32;
#   text      greedy text of the fixtures, bf16 vs --quantization fp8 and the FP8 checkpoints;
#   graphs    bf16 vs FP8 (and the baseline's FP8), dummy llama3.1-8b and llama3.2-1b, FULL_AND_PIECEWISE,
#             decode ms/step at bs 1 / 32 / 128, greedy;
#   sampled   the same at bs 1 / 128, sampled (temperature 1.0, top-p 0.9);
#   prefill   an 8k-token llama3.1-8b prefill, bf16 vs FP8 (and the baseline's FP8);
#   ops       `bench ops --cases fp8-linear,fp8-epilogue` (FP8_OPS: other cases; each FP8 path per shape and token count;
#             the prefill-size projections with their epilogue ops);
#   kernels   `bench kernels` of FP8 llama3.1-8b at bs 1 and 32.
# Each phase's timeout is cut to what is left of FP8_BUDGET seconds (default 540).
set -uo pipefail
source "$(dirname "$0")/env.sh"
link_source_dir "${GS_SOURCE_DIR:-}"
export GRAPHSERVE_LOG_LEVEL=warn
budget=${FP8_BUDGET:-540}
phases=" ${FP8_PHASES:-tests graphs prefill ops} "
has() { [[ $phases == *" $1 "* ]]; }
cap() {  # the phase's timeout: at most $1 seconds, and what is left of the budget
  local left=$((budget - SECONDS))
  ((left < 1)) && left=1
  echo $(($1 < left ? $1 : left))
}
base=$pack/bin/graphserve_base
builds=("$gs")
[[ -x $base ]] && builds+=("$base")
fp8="--quantization fp8"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader

tests() {  # gtest filter, log name
  timeout "$(cap 150)" "$pack/bin/gs_test_cuda" --gtest_filter="$1" >"$out/$2.log" 2>&1
  echo "== gs_test_cuda $1: exit $?"
  grep -E '^\[fp8|^\[  FAILED|PASSED|Failure|Expected|Which is' "$out/$2.log" | head -80
}
has tests && tests 'Fp8Kernels.*:SkinnyGemm*' fp8_tests
has fixtures && tests '*Fp8Checkpoints*:*Fp8Online*' fp8_fixtures

# Greedy text of the HF fixtures (ids printed): bf16 vs --quantization fp8, and the FP8 checkpoints.
has text && for m in llama qwen3 fp8_channel fp8_block fp8_tensor; do
  for q in "" "$fp8"; do
    [[ $m == fp8_* && -n $q ]] && continue
    printf '%-12s %-18s ' "$m" "${q:-bf16}"
    # shellcheck disable=SC2086
    timeout "$(cap 20)" "$gs" generate --model "$root/tests/data/families/$m" --max-tokens 24 --ignore-eos \
      --prompt 'Once upon a time, there was a little girl' --temperature 0 $q 2>&1 | tail -1 | cut -c1-150
  done
done

graphs() {  # binary, label, preset, batch sizes, timeout, extra flags...
  local b=$1 label=$2 preset=$3 bs=$4 t=$5
  shift 5
  echo "== $label $preset bs $bs $*"
  # shellcheck disable=SC2086
  GRAPHSERVE_LOG_LEVEL=info timeout "$(cap "$t")" "$b" bench graphs --load-format dummy --preset "$preset" \
    --modes FULL_AND_PIECEWISE --batch-sizes $bs --input-len 128 --output-len 32 --num-iters 3 \
    --max-num-batched-tokens 4096 --max-model-len 4096 --output-json '' --output-png '' "$@" 2>&1 |
    grep -E 'FULL_AND_PIECEWISE  |rror|sampling:' | head -8
}
prefill() {  # binary, label, flags...
  local b=$1 label=$2
  shift 2
  echo "== llama3.1-8b prefill 8192 $label"
  timeout "$(cap 60)" "$b" bench latency --load-format dummy --preset llama3.1-8b --batch-size 1 --input-len 8192 \
    --output-len 2 --num-iters 3 --num-iters-warmup 1 --max-num-batched-tokens 8192 --max-model-len 8448 "$@" 2>&1 |
    grep -E 'prefill|rror' | head -3
}
{
  # shellcheck disable=SC2086
  if has graphs; then
    for p in llama3.1-8b llama3.2-1b; do
      graphs "$gs" bf16 $p "1 32 128" 45
      graphs "$gs" fp8 $p "1 32 128" 45 $fp8
      [[ -x $base ]] && graphs "$base" fp8-base $p "1 32 128" 45 $fp8
    done
  fi
  # shellcheck disable=SC2086
  if has sampled; then
    for p in llama3.1-8b llama3.2-1b; do
      graphs "$gs" bf16 $p "1 128" 40 --temperature 1.0 --top-p 0.9
      graphs "$gs" fp8 $p "1 128" 40 $fp8 --temperature 1.0 --top-p 0.9
    done
  fi
  # shellcheck disable=SC2086
  if has prefill; then  # alternated, so drift of the card's clocks does not favour one
    for round in 1 2; do
      prefill "$gs" "bf16 (round $round)"
      prefill "$gs" "fp8 (round $round)" $fp8
      [[ -x $base ]] && prefill "$base" "fp8-base (round $round)" $fp8
    done
  fi
  has ops && timeout "$(cap 150)" "$gs" bench ops --cases "${FP8_OPS:-fp8-linear,fp8-epilogue}" 2>&1 | grep -E 'bench\]|rror'
  # shellcheck disable=SC2086
  has kernels && timeout "$(cap 60)" "$gs" bench kernels --load-format dummy --preset llama3.1-8b --batch-sizes 1,32 \
    --input-len 128 --top 14 --max-model-len 4096 $fp8 2>&1 | grep -vE '^\[20' | head -40
} 2>&1 | tee "$out/fp8_bench.log"
