#!/usr/bin/env bash
# The sampling kernel in one device call, from the pack in $PACK (default .gpu; binaries may be
# xz-compressed), what results/sampling_h200.txt holds:
#   tests    gs_test_cuda CudaSampler.* (draws equal the CPU reference's; clusters of 8 CTAs a row
#            at 9 rows, one CTA a row at 72);
#   kernels  `bench kernels` of $SAMP_MODEL at bs $SAMP_BS: sample_kernel's time a step for each
#            set of SAMP_SETS (greedy; temp: temperature 1; topk: temperature 1, top-p 0.95,
#            top-k 50; topp: temperature 0.7, top-p 0.9), by each build of SAMP_BUILDS;
#   graphs   `bench graphs` ms/step of the same sets, two rounds alternating the builds;
#   ops      `bench ops --cases sampling`: the sampler alone on flat and peaked synthetic rows
#            (not in the default phases; builds before it lack the case).
#   SAMP_PHASES (default "tests kernels graphs"), SAMP_MODEL (llama3.2-1b), SAMP_BS (1,32,128),
#   SAMP_SETS (default "greedy topk topp"), SAMP_BUILDS (binaries of $pack/bin to compare;
#   default graphserve.old, where present, and graphserve)
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/sampling_check.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
phases=${SAMP_PHASES:-tests kernels graphs}
has() { [[ " $phases " == *" $1 "* ]]; }
model=${SAMP_MODEL:-llama3.2-1b}
batches=${SAMP_BS:-1,32,128}
builds=(graphserve)
[[ -x $pack/bin/graphserve.old ]] && builds=(graphserve.old graphserve)
[[ -n ${SAMP_BUILDS:-} ]] && read -r -a builds <<<"$SAMP_BUILDS"
flag_sets=()
for set in ${SAMP_SETS:-greedy topk topp}; do
  case $set in
    greedy) flag_sets+=("") ;;
    temp) flag_sets+=("--temperature 1.0") ;;
    topk) flag_sets+=("--temperature 1.0 --top-p 0.95 --top-k 50") ;;
    topp) flag_sets+=("--temperature 0.7 --top-p 0.9") ;;
    *) echo "SAMP_SETS: unknown set $set (greedy, temp, topk, topp)" >&2 && exit 2 ;;
  esac
done
label() { [[ -z $1 ]] && echo greedy || echo "[$1]"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

if has tests; then
  timeout 200 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter='CudaSampler.*' >"$out/sampler_tests.log" 2>&1
  echo "== CudaSampler.*: exit $?"
  grep -E '^\[(       OK|  FAILED  |  PASSED  )\]|Failure|Expected|Which' "$out/sampler_tests.log" | head -n 20
fi
if has kernels; then
  for b in "${builds[@]}"; do
    for f in "${flag_sets[@]}"; do
      echo "== $b kernels $model $(label "$f")"
      # shellcheck disable=SC2086
      timeout 90 "$pack/bin/$b" bench kernels --load-format dummy --preset "$model" --batch-sizes "$batches" \
        --input-len 128 --output-len 17 --top 14 --max-model-len 4096 $f 2>&1 | grep -E '^batch|sample_kernel'
    done
  done
fi
if has ops; then
  for b in "${builds[@]}"; do
    echo "== $b bench ops --cases sampling"
    timeout 120 "$pack/bin/$b" bench ops --cases sampling 2>&1 | grep -E '^\[sampling|rror'
  done
fi
if has graphs; then
  for round in 1 2; do
    for b in "${builds[@]}"; do
      for f in "${flag_sets[@]}"; do
        # shellcheck disable=SC2086
        timeout 90 "$pack/bin/$b" bench graphs --load-format dummy --preset "$model" --modes FULL_AND_PIECEWISE \
          --batch-sizes "$batches" --input-len 128 --output-len 32 --num-iters 3 --max-model-len 4096 \
          --output-json '' --output-png '' $f 2>&1 | grep -E '^FULL_AND_PIECEWISE +[0-9]' |
          awk -v h="round $round $b $(label "$f")" '{printf "%s bs %s %s ms\n", h, $2, $3}'
      done
    done
  done
fi
