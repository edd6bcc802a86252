#!/usr/bin/env bash
# The MoE check (issue 28) in one device call, from the repository copy with a pack made by
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" tools/gpu/pack.sh build/release
# (optionally a baseline's graphserve copied to <pack>/bin/graphserve_base; binaries may be
# xz-compressed as bin/NAME.xz):   PACK=<pack> bash tools/gpu/moe_check.sh
# MOE_PHASES (words, in order; default "tests families qwen mixtral", about 5 min):
#   tests     the MoeOps GPU tests: the MoE kernels against the CPU reference (routing rules,
#             experts at 1..300 tokens with and without a gated shared expert, graph replay
#             after the routing changed);
#   families  the MoE fixture families in bf16 against HF's f32 (tests/data/families);
#   qwen      the floors (the weight bytes a step reads: the dense weights, the embedding table
#             whole, the experts touched under uniform routing, over the card's bandwidth), then
#             dummy qwen3-30b-a3b decode ms/step at bs 1 / 32 / 128 in FULL_AND_PIECEWISE and NONE
#             (and the baseline's FULL_AND_PIECEWISE), greedy, then sampled (t 1, top-p 0.95, top-k 50);
#   kernels   `bench kernels` of qwen3-30b-a3b at bs 1 (and the baseline's);
#   mixtral   the same as qwen for mixtral-8x7b, where its 93 GB fit the card;
#   peer      HF's eager decode on the same shapes (make_family_fixtures.py peer);
#   dense     the dense form (MoeKernelOptions::dense_max_tokens) against the grouped GEMMs:
#             mixtral-8x7b and qwen3-30b-a3b decode ms/step at bs 1..256 in FULL_AND_PIECEWISE,
#             the default, the dense form from 4 pairs an expert, and the grouped GEMMs only
#             (DENSE_PRESETS: the presets; DENSE_ARGS: the middle run's options).
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} GS_FAMILY_FIXTURES=$root/tests/data/families
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
base=$pack/bin/graphserve_base
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
mem_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print int($1 / 1024)}')

tests() {  # gtest filter
  timeout 120 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="$1" 2>&1 |
    grep -E '^\[  (FAILED|PASSED) |families-bf16|Failure|Expected|Which is' | head -n 30
}
graphs() {  # graphs <binary> <preset> <modes> [args...]; BATCHES: the batch sizes
  local bin=$1 p=$2 m=$3
  shift 3
  timeout 240 "$bin" bench graphs --load-format dummy --preset "$p" --batch-sizes "${BATCHES:-1,32,128}" --input-len 128 \
    --output-len 32 --num-iters 3 --modes "$m" --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^(NONE|FULL|device)|rror|MoE' | grep -v 'capture 0.00 s' | sed "s|^|$(basename "$bin") |"
}
decode() {  # decode <preset>: floors, this build in both modes, the baseline, sampled
  bash "$root/tools/gpu/moe_floors.sh" "$gs" "$1"
  GRAPHSERVE_LOG_LEVEL=info graphs "$gs" "$1" FULL_AND_PIECEWISE,NONE
  [[ -x $base ]] && graphs "$base" "$1" FULL_AND_PIECEWISE
  graphs "$gs" "$1" FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50 | sed 's/$/ sampled/'
}

for phase in ${MOE_PHASES:-tests families qwen mixtral}; do
  echo "== $phase"
  case $phase in
    tests) tests 'MoeOps*' ;;
    families) tests '*FamiliesBf16*moe*:*FamiliesBf16*mixtral*:*FamiliesBf16*deepseek*:*FamiliesBf16*gpt_oss*' ;;
    qwen) decode qwen3-30b-a3b ;;
    kernels)
      for b in "$gs" "$base"; do
        [[ -x $b ]] && timeout 120 "$b" bench kernels --load-format dummy --preset qwen3-30b-a3b --batch-sizes 1 \
          --input-len 128 --top 16 --output-json '' 2>&1 | grep -vE '^\[' | sed "s|^|$(basename "$b") |"
      done
      ;;
    mixtral)
      if ((mem_gib >= 120)); then decode mixtral-8x7b; else echo "skipped: 93 GB of bf16 weights, ${mem_gib} GiB card"; fi
      ;;
    dense)
      for p in ${DENSE_PRESETS:-mixtral-8x7b qwen3-30b-a3b}; do
        [[ $p == mixtral-8x7b ]] && ((mem_gib < 120)) && continue
        for args in "" "${DENSE_ARGS:---moe-dense-min-pairs-per-expert 4}" "--moe-dense-max-tokens 0"; do
          # shellcheck disable=SC2086
          BATCHES=1,32,64,128,256 graphs "$gs" "$p" FULL_AND_PIECEWISE $args | sed "s/\$/ [${args:-default}]/"
        done
      done
      ;;
    peer)
      timeout 150 python3 tools/hf_fixtures/make_family_fixtures.py peer "$out/hf_peer.json" qwen3-30b-a3b,mixtral-8x7b \
        2>&1 | grep -E '^(qwen|mixtral)|rror'
      ;;
  esac
done
