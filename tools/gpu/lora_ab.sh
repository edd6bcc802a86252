#!/usr/bin/env bash
# A/B of the LoRA kernel variants behind environment switches, in one device call: the LoRA GPU
# tests, then decode ms per step (no adapter, one adapter, 8 adapters; the bench of lora_bench.sh)
# at each batch size for each variant:
#   default                      the expand fused into the op after the base projection
#                                (split_qkv_rope, gated activation, residual add + RMSNorm) and the
#                                shrink's rows form (a block per token and rank rows) from 2 tokens
#   GS_LORA_FUSE=0               separate expand kernels (=small: fused below 64 tokens only)
#   GS_LORA_SHRINK_ROWS_FROM=N   the rows form from N tokens on (1: everywhere; 9999: never)
#   GS_LORA_STACKED=0            lora_shrink kernels instead of the stacked shrink (every slot's
#                                A rows under the base weight: one GEMM for both, from 2 tokens)
# Pack as tools/gpu/lora_run.sh says, copy this script beside it, run `bash .gpu-lora/lora_ab.sh`.
# VARIANTS_<bs> (space-separated, each "default" or VAR=value[+VAR=value...]) overrides a batch
# size's list.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PACK=$here
# shellcheck source=tools/gpu/env.sh
source "$here/env.sh"
timeout 150 "$pack/bin/gs_test_cuda" --gtest_filter='*Lora*' >"$out/lora_tests.log" 2>&1
echo "== LoRA GPU tests: $(grep -E '^\[  (PASSED|FAILED)' "$out/lora_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|error|LoRA vs merged' "$out/lora_tests.log" | head -n 20
adapters=/tmp/gs_lora_adapters
python3 "$here/make_lora_adapters.py" "$adapters" 8 16 16 2048 8192 2048 512 >/dev/null || exit 1
mods=()
for i in 0 1 2 3 4 5 6 7; do mods+=("a$i=$adapters/a$i"); done
declare -A variants=(
  [1]="${VARIANTS_1:-default}"
  [32]="${VARIANTS_32:-default GS_LORA_STACKED=0 default GS_LORA_STACKED=0}"
  [128]="${VARIANTS_128:-default GS_LORA_STACKED=0}")
for bs in ${BATCH_SIZES:-1 32 128}; do
  for v in ${variants[$bs]}; do
    echo "== bs $bs, $v"
    log="$out/ab_bs${bs}.log"
    IFS=+ read -ra kv <<<"${v/default/GS_LORA_AB=default}"
    env "${kv[@]}" timeout 200 "$gs" bench latency --load-format dummy --preset llama3.2-1b \
      --input-len 32 --output-len 64 --num-iters 2 --max-num-seqs 128 --max-model-len 256 \
      -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128] --batch-size "$bs" --enable-lora --max-loras 8 \
      --max-lora-rank 16 --max-cpu-loras 8 --lora-modules "${mods[@]}" --lora-spread 0 1 8 2>>"$log" |
      grep "lora spread"
  done
  grep -E "captures after|rror" "$out/ab_bs${bs}.log" | sed 's/^\[[^]]*\] //' | sort | uniq -c | head -n 3
done
