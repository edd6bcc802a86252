#!/usr/bin/env bash
# The merged tree's GPU check in one device call (after GS_GPU_NO_BUILD=1 GS_GPU_GOLDEN=1 tools/gpu/pack.sh
# build/release, and ../shared/tools/hf_peer.py copied into the pack, $PACK or .gpu): every GPU test; bench graphs (NONE vs
# FULL_AND_PIECEWISE, prompt 128) on the issue-8 shapes, sampled as well on llama3.2-1b; bench kernels on
# llama3.2-1b; LoRA decode (no adapter / one / eight) at bs 1 and 32; the HF peer (static cache + one CUDA graph per step) on the same shapes.
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/final_check.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} GS_FAMILY_FIXTURES=$root/tests/data/families
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ -z "${GS_GPU_SKIP_TESTS:-}" ]]; then
  timeout 420 "$pack/bin/gs_test_cuda" --gtest_color=no >"$out/tests.log" 2>&1
  echo "== gs_test_cuda: exit $?"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]' "$out/tests.log" | tail -n 20
fi
graphs() {  # graphs <tag> <preset> <batch sizes> [args...]
  local tag=$1 preset=$2 bs=$3; shift 3
  timeout 300 "$gs" bench graphs --load-format dummy --preset "$preset" --batch-sizes "$bs" --input-len 128 \
    --output-len 32 --num-iters 5 --output-png '' --output-json "$out/graphs_$tag.json" "$@" 2>/dev/null |
    grep -E '^(mode|NONE|FULL|device)' | grep -v 'capture 0.00 s'
}
echo "== bench graphs"
graphs llama1b llama3.2-1b 1,8,32,128 --modes NONE,FULL_AND_PIECEWISE
graphs llama1b_sampled llama3.2-1b 1,8,32,128 --modes FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50
graphs smollm smollm2-135m 1,128 --modes NONE,FULL_AND_PIECEWISE
graphs qwen3 qwen3-0.6b 1,128 --modes NONE,FULL_AND_PIECEWISE
graphs llama8b llama3.1-8b 1,128 --modes NONE,FULL_AND_PIECEWISE
echo "== bench kernels, llama3.2-1b"
timeout 200 "$gs" bench kernels --load-format dummy --preset llama3.2-1b --batch-sizes 1,32,128 --top 10 \
  2>/dev/null | tee "$out/kernels_llama3.2-1b.txt"
echo "== LoRA, dummy llama3.2-1b, 8 random rank-16 adapters on all 7 projections (lora_bench.sh, bs 1, 32 and 128)"
GS_GPU_SKIP_TESTS=1 BATCH_SIZES="1 32 128" timeout 300 bash "$root/tools/gpu/lora_bench.sh" 2>&1 |
  grep -E '^(==|lora spread|decode / step|made)' | grep -v 'without --enable-lora'
echo "== HF peer (graph variant)"
[[ -f $pack/hf_peer.py ]] && (cd "$out" && timeout 400 python3 "$pack/hf_peer.py" \
  llama3.2-1b,smollm2-135m,llama3.1-8b graph 1,32,128 >hf_peer.log 2>&1; tail -n 12 hf_peer.jsonl)
"$gs" --log-level info generate --load-format dummy --preset llama3.2-1b --prompt Hello --max-tokens 16 --ignore-eos \
  --temperature 0 2>&1 >/dev/null | grep -iE 'graph memory|captured|gemm' | tail -n 4
