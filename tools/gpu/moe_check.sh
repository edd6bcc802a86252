#!/usr/bin/env bash
# The MoE check in one device call, from a folder packed by
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda gs_test_model gs_test_runner gs_test_ops" \
#     GS_GPU_PACK=/work/main/.gpu-moe tools/gpu/pack.sh build/release
#   cp -r tests/data/families tools/hf_fixtures/make_family_fixtures.py tools/gpu/moe_check.sh /work/main/.gpu-moe/
# device run, kind nvidia-h200, carry [".gpu-moe"], command: bash .gpu-moe/moe_check.sh
#
# In order (each step under its own timeout, logs straight into $OUT so a cut-off call still
# returns what ran): 1. the MoE fixtures (tiny random-weight Mixtral, Qwen2-MoE, Qwen3-MoE in the
# Hub's per-expert names, HF f32 greedy tokens and logits) made on the CPU and returned as
# moe_fixtures.tgz; 2. the CPU tests of every family against them (f32, NONE and
# FULL_AND_PIECEWISE); 3. the GPU tests (MoE kernels vs the CPU reference, graph replay, bf16
# families vs HF); 4. decode ms/step of dummy qwen3-30b-a3b and mixtral-8x7b (when it fits) at
# bs 1 / 32 / 128, NONE and FULL_AND_PIECEWISE, greedy and sampled, with the bandwidth floors
# of the expert bytes touched; 5. HF's eager decode on the same shapes (peer).
set -uo pipefail
pk=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$pk/out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pk/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
export GRAPHSERVE_LOG_LEVEL=warn GRAPHSERVE_SHARED=$pk/shared
gs=$pk/bin/graphserve
log=$out/moe_check.log
exec > >(tee -a "$log") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mem_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print int($1 / 1024)}')

echo "== 1. fixtures"
fx=$pk/families
timeout 75 python3 "$pk/make_family_fixtures.py" fixtures "$fx" --tokenizer "$fx/llama" \
  --only mixtral,qwen2_moe,qwen3_moe 2>&1 | grep -vE 'Warning|warn\(' | tail -n 12
(cd "$fx" && tar czf "$out/moe_fixtures.tgz" mixtral qwen2_moe qwen3_moe report.json)
export GS_FAMILY_FIXTURES=$fx

echo "== 2. CPU tests against the fixtures"
timeout 60 "$pk/bin/gs_test_ops" --gtest_filter='MoeRoute*' 2>&1 | grep -E '^\[  (FAILED|PASSED) |Failure' | head
timeout 20 "$pk/bin/gs_test_model" --gtest_filter='*Families*:*MoeConfig*' >"$out/cpu_tests.log" 2>&1
timeout 30 "$pk/bin/gs_test_runner" --gtest_filter='*FamiliesModes*moe*:*FamiliesModes*mixtral*' >>"$out/cpu_tests.log" 2>&1
grep -E '^\[  (FAILED|PASSED) |^\[       OK|Failure|Expected|Which is|actual' "$out/cpu_tests.log" | head -n 40

echo "== 3. GPU tests"
timeout 60 "$pk/bin/gs_test_cuda" --gtest_filter='MoeOps*:*FamiliesBf16*moe*:*FamiliesBf16*mixtral*' >"$out/gpu_tests.log" 2>&1
grep -E '^\[  (FAILED|PASSED) |families-bf16|Failure' "$out/gpu_tests.log" | head -n 30

floors() {  # floors <preset> <E> <k> <GB/s>: weight bytes a decode step reads at bs 1 / 32 / 128
  local p=$1 E=$2 k=$3 bw=$4
  "$gs" info --preset "$p" | grep -E '^(parameters|active)'
  "$gs" info --preset "$p" | awk -v E="$E" -v k="$k" -v bw="$bw" '
    /^parameters:/ {tot=$2} /^active parameters/ {act=$5}
    END { ex=(tot-act)/(E-k)*E; dense=tot-ex;   # all experts vs the rest
      for (b = 1; b <= 128; b *= (b == 1 ? 32 : 4)) { touched = E * (1 - (1 - k / E) ^ b);
        bytes = 2 * (dense + ex * touched / E);
        printf "floor bs %d: %.2f GB (%.1f of %d experts a layer, uniform routing) = %.3f ms at %d GB/s\n",
               b, bytes / 1e9, touched, E, bytes / bw / 1e6, bw } }'
}
graphs() {  # graphs <preset> <modes> [args...]
  local p=$1 m=$2; shift 2
  timeout 150 "$gs" bench graphs --load-format dummy --preset "$p" --batch-sizes 1,32,128 --input-len 128 \
    --output-len 32 --num-iters 3 --modes "$m" --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^(mode|NONE|FULL|device)|rror|MoE' | grep -v 'capture 0.00 s'
}
bw=3350
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && bw=4800
echo "== 4. qwen3-30b-a3b"
floors qwen3-30b-a3b 128 8 "$bw"
GRAPHSERVE_LOG_LEVEL=info graphs qwen3-30b-a3b FULL_AND_PIECEWISE,NONE
if ((mem_gib >= 120)); then
  echo "== 4. mixtral-8x7b"
  floors mixtral-8x7b 8 2 "$bw"
  graphs mixtral-8x7b FULL_AND_PIECEWISE
else
  echo "== 4. mixtral-8x7b skipped: its 93 GB of bf16 weights do not fit ${mem_gib} GiB"
fi
echo "== 4. qwen3-30b-a3b sampled"
graphs qwen3-30b-a3b FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50

echo "== 5. HF peer (eager, dynamic cache)"
timeout 100 python3 "$pk/make_family_fixtures.py" peer "$out/hf_peer.json" qwen3-30b-a3b 2>&1 | grep -E '^qwen|rror'
