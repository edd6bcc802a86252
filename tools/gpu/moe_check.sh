#!/usr/bin/env bash
# The MoE check in one device call, from the repository copy with a pack made by
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" tools/gpu/pack.sh build/release
# device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/moe_check.sh   (about 4 min)
#
# 1. GPU tests: the MoE kernels against the CPU reference (routing rules, experts at 1..300
#    tokens with and without a gated shared expert, graph replay after the routing changed) and
#    the MoE fixture families in bf16 against HF's f32 (tests/data/families);
# 2. decode ms/step of dummy qwen3-30b-a3b (and mixtral-8x7b where its 93 GB fit) at bs 1 / 32 /
#    128 in FULL_AND_PIECEWISE and NONE, greedy, then sampled, with the floors: the weight bytes a
#    step reads (all dense weights, the embedding table counted whole, + the experts touched: the
#    expected count for uniform routing) over
#    the card's bandwidth;
# 3. (GS_MOE_PEER=1) HF's eager decode on the same shapes (make_family_fixtures.py peer).
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} GS_FAMILY_FIXTURES=$root/tests/data/families
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mem_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print int($1 / 1024)}')

echo "== 1. GPU tests"
timeout 120 "$pack/bin/gs_test_cuda" --gtest_color=no \
  --gtest_filter='MoeOps*:*FamiliesBf16*moe*:*FamiliesBf16*mixtral*' >"$out/moe_gpu_tests.log" 2>&1
grep -E '^\[  (FAILED|PASSED) |families-bf16|Failure' "$out/moe_gpu_tests.log" | head -n 30

graphs() {  # graphs <preset> <modes> [args...]
  local p=$1 m=$2; shift 2
  timeout 240 "$gs" bench graphs --load-format dummy --preset "$p" --batch-sizes 1,32,128 --input-len 128 \
    --output-len 32 --num-iters 3 --modes "$m" --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^(mode|NONE|FULL|device)|rror|MoE' | grep -v 'capture 0.00 s'
}
echo "== 2. qwen3-30b-a3b"
bash "$root/tools/gpu/moe_floors.sh" "$gs" qwen3-30b-a3b
GRAPHSERVE_LOG_LEVEL=info graphs qwen3-30b-a3b FULL_AND_PIECEWISE,NONE
graphs qwen3-30b-a3b FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50
if ((mem_gib >= 120)); then
  echo "== 2. mixtral-8x7b"
  bash "$root/tools/gpu/moe_floors.sh" "$gs" mixtral-8x7b
  graphs mixtral-8x7b FULL_AND_PIECEWISE,NONE
else
  echo "== 2. mixtral-8x7b skipped: its 93 GB of bf16 weights do not fit ${mem_gib} GiB"
fi
if [[ -n "${GS_MOE_PEER:-}" ]]; then
  echo "== 3. HF peer (eager, dynamic cache)"
  timeout 150 python3 tools/hf_fixtures/make_family_fixtures.py peer "$out/hf_peer.json" qwen3-30b-a3b,mixtral-8x7b 2>&1 |
    grep -E '^(qwen|mixtral)|rror'
fi
