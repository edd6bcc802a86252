#!/usr/bin/env bash
# A/B of the LoRA kernel forms on the GPU machine: GS_LORA_SEGMENTS = 0 (per-token shrink and
# expand), 1 (segmented shrink), 2 (segmented expand), 3 (both). The LoRA GPU tests under each,
# then decode ms per step of tools/gpu/lora_bench.sh's setup (dummy llama3.2-1b, 8 random
# rank-16 adapters on all seven projections) at bs 1, 32, 128 under each. Pack as for
# tools/gpu/lora_run.sh (this script, lora_bench.sh and make_lora_adapters.py in the pack).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$here/shared
modes=${MODES:-0 1 2 3}
for m in $modes; do
  GS_LORA_SEGMENTS=$m timeout 120 "$here/bin/gs_test_cuda" --gtest_filter='*Lora*' >"$out/lora_tests_$m.log" 2>&1
  echo "== tests GS_LORA_SEGMENTS=$m: $(grep -E '^\[  (PASSED|FAILED)' "$out/lora_tests_$m.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|LoRA vs merged' "$out/lora_tests_$m.log" | head -n 6
done
adapters=/tmp/gs_lora_adapters
python3 "$here/make_lora_adapters.py" "$adapters" 8 16 16 2048 8192 2048 512 >/dev/null || exit 1
mods=()
for i in 0 1 2 3 4 5 6 7; do mods+=("a$i=$adapters/a$i"); done
for bs in ${BATCH_SIZES:-1 32 128}; do
  for m in $modes; do
    echo "== bs $bs GS_LORA_SEGMENTS=$m"
    GS_LORA_SEGMENTS=$m timeout 150 "$here/bin/graphserve" bench latency --load-format dummy --preset llama3.2-1b \
      --input-len 32 --output-len 64 --num-iters 2 --max-num-seqs 128 --max-model-len 256 \
      -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128] --batch-size "$bs" --enable-lora --max-loras 8 \
      --max-lora-rank 16 --max-cpu-loras 8 --lora-modules "${mods[@]}" --lora-spread 0 1 8 2>/dev/null |
      grep "lora spread"
  done
done
