#!/usr/bin/env bash
# A/B of graphserve builds ($PACK/bin/gs_<tag>, copied there beside the pack's own binary) on decode
# steps: bench graphs FULL_AND_PIECEWISE, prompt 128, AB_ROUNDS rounds with the builds in turn.
#   AB_BINS      tags (default "base new")
#   AB_SHAPES    preset:batch,sizes words (default "llama3.2-1b:1,8,32,128")
#   AB_SAMPLING  ";"-separated sampling flag sets (default: greedy only, "--temperature 0")
#   device run, kind nvidia-h200, carry [".gpu"] (tools/gpu/pack.sh), command: bash tools/gpu/build_ab.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=warn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
IFS=';' read -r -a samplings <<<"${AB_SAMPLING:---temperature 0}"
for round in $(seq "${AB_ROUNDS:-2}"); do
  for b in ${AB_BINS:-base new}; do
    for shape in ${AB_SHAPES:-llama3.2-1b:1,8,32,128}; do
      for sampling in "${samplings[@]}"; do
        # shellcheck disable=SC2086  # $sampling is a list of flags
        timeout 120 "$pack/bin/gs_$b" bench graphs --load-format dummy --preset "${shape%%:*}" \
          --batch-sizes "${shape#*:}" --input-len 128 --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE \
          --output-png '' --output-json '' $sampling 2>/dev/null | grep -E '^FULL_AND_PIECEWISE +[0-9]' |
          awk -v t="r$round $b ${shape%%:*} ${sampling%% *}" '{print t, $2, $3}'
      done
    done
  done
done
