#!/usr/bin/env bash
# Issue 27, FP8-weight decode (the skinny FP8 kernel with the deferred norm computed in it) in one
# device call, beside a baseline binary (main's graphserve).
# Pack (here): tools/gpu/pack.sh into <pack> (GS_GPU_TARGETS="graphserve gs_test_cuda"), copy
# tests/data/families to <pack>/families, the baseline's graphserve to <pack>/bin/graphserve_base,
# this script to <pack>/; strip the binaries and `tar -cJf pack.txz bin lib families` inside <pack>
# (the device tool carries 64 MiB), keeping only pack.txz and this script. Then:
#   device run, kind nvidia-h200, carry [".gpu-fp8w"], command: bash .gpu-fp8w/fp8w_check.sh
# FP8W_PHASES picks the phases, run in this order (default: tests graphs kernels sampled):
#   tests    gs_test_cuda Fp8Kernels.* and SkinnyGemm* (the FP8 linear at every token count, the
#            fused epilogues and the deferred norm against the separate norm and the CPU);
#   fixtures gs_test_cuda Fp8Checkpoints.* and Fp8Online.* (HF fixtures; accuracy vs bf16 / f32);
#   graphs1  dummy llama3.1-8b bs 1 decode ms/step: bf16, FP8, and the baseline's FP8;
#   graphs   bf16 vs FP8 (this binary), and the baseline's FP8, at bs 1 / 32 / 128, llama3.1-8b and
#            llama3.2-1b, greedy;
#   sampled  bf16 vs FP8 (this binary) at bs 1, sampled (T 1, top-p 0.9), both models;
#   ops      `bench ops --cases fp8-linear`, this binary then the baseline (rows up to 16 tokens);
#   kernels  `bench kernels` of FP8 llama3.1-8b at bs 1.
# Each phase's timeout is cut to what is left of FP8W_BUDGET seconds (default 225).
set -uo pipefail
cd "$(dirname "$0")"
[[ -f pack.txz && ! -d bin ]] && tar -xJf pack.txz
out=${OUT:-./out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} GS_FAMILY_FIXTURES=$PWD/families
export GRAPHSERVE_LOG_LEVEL=warn
budget=${FP8W_BUDGET:-225}
phases=" ${FP8W_PHASES:-tests graphs kernels sampled} "
has() { [[ $phases == *" $1 "* ]]; }
# The phase's timeout: at most $1 seconds, and what is left of the budget.
cap() {
  local left=$((budget - SECONDS))
  ((left < 1)) && left=1
  echo $(($1 < left ? $1 : left))
}
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader
echo "unpacked after ${SECONDS}s"

tests() {  # gtest filter, log name
  timeout "$(cap 70)" bin/gs_test_cuda --gtest_filter="$1" >"$out/$2.log" 2>&1
  echo "== gs_test_cuda $1: exit $?"
  grep -E '^\[fp8|^\[  FAILED|PASSED|Failure|Expected|Which is' "$out/$2.log" | head -60
}
has tests && tests 'Fp8Kernels.*:SkinnyGemm*' fp8w_tests
has fixtures && tests 'Fp8Checkpoints.*:Fp8Online.*' fp8w_fixtures

graphs() {  # binary, label, preset, batch sizes, timeout, extra flags...
  local gs=$1 label=$2 preset=$3 bs=$4 t=$5
  shift 5
  echo "== $label $preset bs $bs $*"
  # shellcheck disable=SC2086
  GRAPHSERVE_LOG_LEVEL=info timeout "$(cap "$t")" $gs bench graphs --load-format dummy --preset "$preset" \
    --modes FULL_AND_PIECEWISE --batch-sizes $bs --input-len 128 --output-len 32 --num-iters 3 \
    --max-num-batched-tokens 4096 --max-model-len 4096 --output-json '' --output-png '' "$@" 2>&1 |
    grep -E 'FULL_AND_PIECEWISE  |rror|sampling:' | head -8
}
fp8="--quantization fp8"
{
  if has graphs1; then
    graphs bin/graphserve bf16 llama3.1-8b 1 30
    # shellcheck disable=SC2086
    graphs bin/graphserve fp8 llama3.1-8b 1 30 $fp8
    # shellcheck disable=SC2086
    graphs bin/graphserve_base fp8-base llama3.1-8b 1 30 $fp8
  fi
  if has graphs; then
    for p in llama3.1-8b llama3.2-1b; do
      graphs bin/graphserve bf16 $p "1 32 128" 45
      # shellcheck disable=SC2086
      graphs bin/graphserve fp8 $p "1 32 128" 45 $fp8
      # shellcheck disable=SC2086
      graphs bin/graphserve_base fp8-base $p "1 32 128" 45 $fp8
    done
  fi
  if has ops; then
    for b in graphserve graphserve_base; do
      echo "== bench ops fp8-linear: $b"
      timeout "$(cap 45)" bin/$b bench ops --cases fp8-linear 2>&1 | grep -E 'bench\]' |
        awk '$3 !~ /^[0-9]+$/ || $3 <= 16'
    done
  fi
  if has kernels; then
    echo "== kernels llama3.1-8b bs 1 fp8"
    # shellcheck disable=SC2086
    timeout "$(cap 45)" bin/graphserve bench kernels --load-format dummy --preset llama3.1-8b --batch-sizes 1 \
      --input-len 128 --top 14 --max-model-len 4096 $fp8 2>&1 | grep -vE '^\[20' | head -30
  fi
  if has sampled; then
    for p in llama3.1-8b llama3.2-1b; do
      graphs bin/graphserve bf16 $p 1 25 --temperature 1.0 --top-p 0.9
      # shellcheck disable=SC2086
      graphs bin/graphserve fp8 $p 1 25 $fp8 --temperature 1.0 --top-p 0.9
    done
  fi
  echo "done after ${SECONDS}s"
} 2>&1 | tee "$out/fp8w_bench.log"
