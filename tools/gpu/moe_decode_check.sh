#!/usr/bin/env bash
# The MoE decode check (issue 28's decode speed) in one device call, run from a pack folder that
# holds this script, graphserve and gs_test_cuda (pack.sh) and graphserve_base, the baseline's
# stripped binary (binaries may be xz-compressed as bin/NAME.xz):
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve gs_test_cuda" GS_GPU_PACK=$PWD/.gpu-moe \
#     tools/gpu/pack.sh build/release && cp tools/gpu/moe_decode_check.sh .gpu-moe/
#   device run, kind nvidia-h200, carry [".gpu-moe"], command: bash .gpu-moe/moe_decode_check.sh
# MOE_PHASES (words, in order; default "tests qwen kernels mixtral", about 6 min: split it over
# two calls): tests: the MoeOps GPU tests; families: the MoE fixture families in bf16 against
# HF (gs_test_cuda *FamiliesBf16*); qwen: the floors, dummy qwen3-30b-a3b decode ms/step at
# bs 1 / 32 / 128 (FULL_AND_PIECEWISE, input 128) new then base, sampled at bs 1 (t 1, top-p 0.95,
# top-k 50); qwen_new: the new binary's only; kernels (kernels_new): `bench kernels` at bs 1, new
# and base (new only); mixtral: mixtral-8x7b's floors and decode steps, new then base.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ -f $here/env.sh ]]; then
  # shellcheck source=tools/gpu/env.sh
  source "$here/env.sh"
else
  PACK=${PACK:-$here}
  # shellcheck source=tools/gpu/env.sh
  source "$here/../tools/gpu/env.sh"
fi
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
base=${GS_BASE:-$pack/bin/graphserve_base}
floors=$here/moe_floors.sh
[[ -f $floors ]] || floors=$root/tools/gpu/moe_floors.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

graphs() {  # graphs <binary> <preset> <batch sizes> [args...]
  local bin=$1 p=$2 bs=$3
  shift 3
  timeout 150 "$bin" bench graphs --load-format dummy --preset "$p" --batch-sizes "$bs" --input-len 128 \
    --output-len 32 --num-iters 3 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^(NONE|FULL)|rror' | grep -v 'capture 0.00 s' | sed "s|^|$(basename "$bin") $p |"
}
kernels() {  # kernels <binary> <preset> <batch size>
  timeout 120 "$1" bench kernels --load-format dummy --preset "$2" --batch-sizes "$3" --input-len 128 --top 16 \
    --output-json '' 2>&1 | grep -vE '^\[' | sed "s|^|$(basename "$1") |"
}

for phase in ${MOE_PHASES:-tests qwen kernels mixtral}; do
  case $phase in
    tests)
      echo "== MoeOps GPU tests"
      timeout 90 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='MoeOps*' 2>&1 |
        grep -E '^\[  (FAILED|PASSED) |Failure|Expected|Which is' | head -n 30
      ;;
    families)  # the MoE fixture families end to end in bf16 against HF's f32 (tests/data/families)
      GS_FAMILY_FIXTURES=$root/tests/data/families timeout 120 "$pack/bin/gs_test_cuda" --gtest_color=no \
        --gtest_filter='*FamiliesBf16*' 2>&1 | grep -E '^\[  (FAILED|PASSED) |families-bf16|Failure' | head -n 30
      ;;
    qwen)  # new then base, greedy; sampled at bs 1
      bash "$floors" "$gs" qwen3-30b-a3b
      graphs "$gs" qwen3-30b-a3b 1,32,128
      graphs "$base" qwen3-30b-a3b 1,32,128
      graphs "$gs" qwen3-30b-a3b 1 --temperature 1.0 --top-p 0.95 --top-k 50 | sed 's/$/ sampled/'
      ;;
    qwen_new) graphs "$gs" qwen3-30b-a3b 1,32,128 ;;
    kernels) for b in "$gs" "$base"; do kernels "$b" qwen3-30b-a3b 1; done ;;
    kernels_new) kernels "$gs" qwen3-30b-a3b 1 ;;
    mixtral)  # 93 GB of dummy weights: about a minute a load
      bash "$floors" "$gs" mixtral-8x7b
      graphs "$gs" mixtral-8x7b 1,32,128
      graphs "$base" mixtral-8x7b 1,32,128
      ;;
  esac
done
