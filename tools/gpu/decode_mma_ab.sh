#!/usr/bin/env bash
# The keys-as-rows decode attention (attention/cuda/decode_mma.cuh, GS_DECODE_MMA=0: the tensor-core /
# warp-per-pair decode kernels as before) A/B on decode steps: bench kernels of llama3.2-1b at bs 1 / 32 /
# 128 both ways, env_ab.sh at prompt 128 (bs 1 / 8 / 32 / 128 on the issue-8 shapes), and prompt 4096 at
# bs 1 / 8 (where each context is split over CTAs). Run after final_check.sh in the same call, or alone:
#   device run, kind nvidia-h200, carry [".gpu-pack"], command:
#   python3 -c "import tarfile; tarfile.open('.gpu-pack/gpu.tar.xz').extractall()" && bash tools/gpu/decode_mma_ab.sh
set -uo pipefail
here=$(dirname "$0")
# shellcheck source=tools/gpu/env.sh
source "$here/env.sh"
export GRAPHSERVE_LOG_LEVEL=warn
for v in default GS_DECODE_MMA=0; do
  vars=GS_AB_NONE=1
  [[ $v != default ]] && vars=${v//,/ }
  echo "== bench kernels llama3.2-1b, $v"
  # shellcheck disable=SC2086
  env $vars timeout 200 "$gs" bench kernels --load-format dummy --preset llama3.2-1b --batch-sizes 1,32,128 --top 6 \
    2>/dev/null | grep -E 'batch|attention|decode_'
done
AB_TESTS='' AB_ROUNDS=${AB_ROUNDS:-1} GS_AB="default GS_DECODE_MMA=0" \
  AB_SHAPES=${AB_SHAPES:-"llama3.2-1b:1,8,32,128 smollm2-135m:1,128 qwen3-0.6b:1,32 llama3.1-8b:1,128"} \
  bash "$here/env_ab.sh" | grep -v '^NVIDIA'
for v in default GS_DECODE_MMA=0; do
  vars=GS_AB_NONE=1
  [[ $v != default ]] && vars=${v//,/ }
  # shellcheck disable=SC2086
  env $vars timeout 200 "$gs" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1,8 --input-len 4096 \
    --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' 2>/dev/null |
    grep -E '^FULL_AND_PIECEWISE +[0-9]' | sed "s|^|prompt 4096 $v |"
done
