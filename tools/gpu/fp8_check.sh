#!/usr/bin/env bash
# Issue 27 (FP8) in one device call, run from a packed folder (tools/gpu/pack.sh with
# GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=<repo>/.gpu-fp8, plus tests/data/families
# copied to .gpu-fp8/families and this script):
#   device run, kind nvidia-h200, carry [".gpu-fp8"], command: bash .gpu-fp8/fp8_check.sh
# The packed binaries are ~100 MB, over what the device tool carries (64 MiB): strip them, tar -czf
# bin lib shared families into .gpu-fp8/pack.tgz (~37 MB), and start the command with
# `cd .gpu-fp8 && tar -xzf pack.tgz && ...`.
# FP8_PHASES picks the phases (default: tests graphs prefill sampled):
#   tests    the FP8 GPU tests (quantization bit-exact vs the host, linear vs the dequantized
#            reference at every token count, the fused decode epilogues vs the CPU and the unfused
#            path, FP8 fixtures vs HF f32, --quantization fp8 vs bf16 beside bf16 vs f32);
#   text     greedy text of the HF fixtures, bf16 vs --quantization fp8 and the FP8 checkpoints;
#   graphs   FP8 beside bf16 in the same call, dummy weights, FULL_AND_PIECEWISE: decode ms/step at
#            bs 1 / 32 / 128, llama3.1-8b and llama3.2-1b greedy;
#   sampled  the same sampled (temperature 1.0, top-p 0.9);
#   prefill  an 8k-token llama3.1-8b prefill;
#   ops      `bench ops --cases fp8-linear` (each FP8 path beside bf16 per shape and token count);
#   kernels  `bench kernels` of llama3.1-8b at bs 1 and 32, FP8 (and bf16 with FP8_KERNEL_BF16=1).
# Logs go to $OUT; each command has its own timeout so one slow phase cannot starve the rest.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-./out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} GS_FAMILY_FIXTURES=$PWD/families
export GRAPHSERVE_LOG_LEVEL=warn
gs=bin/graphserve
phases=" ${FP8_PHASES:-tests graphs prefill sampled} "
has() { [[ $phases == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader
if has tests && [[ -x bin/gs_test_cuda ]]; then
  timeout "${FP8_TEST_TIMEOUT:-50}" bin/gs_test_cuda --gtest_filter='*Fp8*' >"$out/fp8_tests.log" 2>&1
  echo "== gs_test_cuda *Fp8*: exit $?"
  grep -E '^\[fp8|FAILED|PASSED|Failure' "$out/fp8_tests.log" | head -60
fi
# Greedy text of the HF fixtures (ids printed): bf16 vs --quantization fp8, and the FP8 checkpoints.
has text && for m in llama qwen3 fp8_channel fp8_block fp8_tensor; do
  for q in "" "--quantization fp8"; do
    [[ $m == fp8_* && -n $q ]] && continue
    printf '%-12s %-18s ' "$m" "${q:-bf16}"
    # shellcheck disable=SC2086
    timeout 20 $gs generate --model "families/$m" --prompt 'Once upon a time, there was a little girl' \
      --max-tokens 24 --ignore-eos --temperature 0 $q 2>&1 | tail -1 | cut -c1-150
  done
done

graphs() {  # preset, timeout, extra flags...
  local preset=$1 t=$2
  shift 2
  for q in "" "--quantization fp8"; do
    echo "== $preset ${q:-bf16} $*"
    # shellcheck disable=SC2086
    GRAPHSERVE_LOG_LEVEL=info timeout "$t" $gs bench graphs --load-format dummy --preset "$preset" --modes FULL_AND_PIECEWISE \
      --batch-sizes 1 32 128 --input-len 128 --output-len 32 --num-iters 3 --max-num-batched-tokens 4096 \
      --max-model-len 4096 --output-json '' --output-png '' $q "$@" 2>&1 | grep -E 'quantization:|FULL_AND|rror|warn|model weights|sampling:' | head -12
  done
}
prefill() {  # preset, timeout
  for q in "" "--quantization fp8"; do
    echo "== $1 prefill 8192 ${q:-bf16}"
    # shellcheck disable=SC2086
    timeout "$2" $gs bench latency --load-format dummy --preset "$1" --batch-size 1 --input-len 8192 --output-len 2 \
      --num-iters 3 --num-iters-warmup 1 --max-num-batched-tokens 8192 --max-model-len 8448 $q 2>&1 |
      grep -E 'prefill|decode|rror' | head -4
  done
}
kernels() {  # preset, batch sizes (FP8_KERNEL_BF16=1: bf16 as well)
  for q in ${FP8_KERNEL_BF16:+""} "--quantization fp8"; do
    echo "== kernels $1 bs $2 ${q:-bf16}"
    # shellcheck disable=SC2086
    timeout 60 $gs bench kernels --load-format dummy --preset "$1" --batch-sizes "$2" --input-len 128 --top 14 \
      --max-model-len 4096 $q 2>&1 | grep -vE '^\[20' | head -40
  done
}
{
  if has graphs; then
    graphs llama3.1-8b "${FP8_8B_TIMEOUT:-40}"
    graphs llama3.2-1b "${FP8_1B_TIMEOUT:-20}"
  fi
  if has sampled; then
    graphs llama3.1-8b "${FP8_8B_TIMEOUT:-40}" --temperature 1.0 --top-p 0.9
    graphs llama3.2-1b 20 --temperature 1.0 --top-p 0.9
  fi
  has prefill && prefill llama3.1-8b "${FP8_PREFILL_TIMEOUT:-30}"
  has ops && timeout 90 $gs bench ops --cases fp8-linear 2>&1 | grep -E 'bench|rror'
  has kernels && kernels llama3.1-8b 1,32
} 2>&1 | tee "$out/fp8_bench.log"
