#!/usr/bin/env bash
# Multi-LoRA decode latency on the GPU machine: dummy llama3.2-1b with 8 random rank-16 adapters
# on all seven projections, decode ms per step at bs 1, 32, 128 with no adapter, every row one
# adapter, and rows spread over 8 adapters, in one process per batch size (the same graphs).
# Also the LoRA kernel test. Needs the pack of tools/gpu/pack.sh in $PACK (default .gpu).
# BATCH_SIZES="32 128" narrows the sizes; SKIP_PLAIN=1 skips the run without --enable-lora;
# GS_GPU_SKIP_TESTS=1 skips the LoRA GPU tests.
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[[ -x $pack/bin/gs_test_cuda && -z "${GS_GPU_SKIP_TESTS:-}" ]] && { timeout 120 "$pack/bin/gs_test_cuda" --gtest_filter='*Lora*' 2>&1 | tail -n 6; }
adapters=${ADAPTERS:-/tmp/gs_lora_adapters}
python3 "$(dirname "$0")/make_lora_adapters.py" "$adapters" 8 16 16 2048 8192 2048 512 || exit 1
echo "made 8 adapters, $(du -sh "$adapters" | cut -f1)"
mods=()
for i in 0 1 2 3 4 5 6 7; do mods+=("a$i=$adapters/a$i"); done
common="--load-format dummy --preset llama3.2-1b --input-len 32 --output-len 64 --num-iters 2 --max-num-seqs 128
  --max-model-len 256 -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128]"
if [[ -z "${SKIP_PLAIN:-}" ]]; then
  echo "== bs 32 without --enable-lora (the plain graphs alone)"
  # shellcheck disable=SC2086
  timeout 200 "$pack/bin/graphserve" bench latency $common --batch-size 32 2>/dev/null | grep "decode / step"
fi
for bs in ${BATCH_SIZES:-1 32 128}; do
  echo "== bs $bs"
  # shellcheck disable=SC2086
  GRAPHSERVE_LOG_LEVEL=info timeout 200 "$pack/bin/graphserve" bench latency $common --batch-size "$bs" \
    --enable-lora --max-loras 8 --max-lora-rank 16 --max-cpu-loras 8 --lora-modules "${mods[@]}" \
    --lora-spread 0 1 8 2>"$out/lora_bs$bs.log"
  grep -E "LoRA|cudagraph mode|error|Error" "$out/lora_bs$bs.log" | sed 's/^\[[^]]*\] //' | head -n 8
done
