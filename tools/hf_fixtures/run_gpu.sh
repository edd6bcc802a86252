#!/usr/bin/env bash
# On the GPU machine, inside the folder pack_gpu.sh filled: graphserve's bf16 family checks
# (gs_test_cuda FamiliesBf16), HF's own bf16 against the same f32 fixtures, then decode ms per
# step of the Phi-3-mini and Gemma-2-2B dummy presets at bs 1 and 32. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-./out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} GS_FAMILY_FIXTURES=$PWD/families
export GRAPHSERVE_LOG_LEVEL=warn PYTHONUNBUFFERED=1
bin/gs_test_cuda --gtest_filter='*FamiliesBf16*' >"$out/bf16_ours.log" 2>&1
grep -E 'families-bf16|FAILED|PASSED|Failure' "$out/bf16_ours.log"
timeout 120 python3 make_family_fixtures.py bf16 families "$out/bf16_hf.json" 2>&1 | grep -E 'hf-bf16|Error'
for p in phi3-mini gemma2-2b; do
  for bs in 1 32; do
    for m in FULL_AND_PIECEWISE NONE; do
      echo "== $p bs $bs $m"
      timeout 120 bin/graphserve bench latency --load-format dummy --preset "$p" --batch-size "$bs" --input-len 128 \
        --output-len 64 --num-iters 3 --num-iters-warmup 1 -cc.cudagraph_mode=$m 2>&1 | grep -E 'decode|prefill|rror'
    done
  done
done 2>&1 | tee "$out/latency.log"
