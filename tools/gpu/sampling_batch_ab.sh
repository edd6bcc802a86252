#!/usr/bin/env bash
# A/B of graphserve builds (.gpu/bin/gs_<tag>, e.g. the sampling kernel's load batch) on sampled and greedy
# decode: bench graphs FULL_AND_PIECEWISE, llama3.2-1b, prompt 128, AB_ROUNDS rounds in turn.
#   AB_BINS   tags (default "b1 b2 b4")
#   device run, kind nvidia-h200, carry [".gpu-pack"], command:
#   python3 -c "import tarfile; tarfile.open('.gpu-pack/gpu.tar.xz').extractall()" && bash tools/gpu/sampling_batch_ab.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=warn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in $(seq "${AB_ROUNDS:-2}"); do
  for b in ${AB_BINS:-b1 b2 b4}; do
    for sampling in "--temperature 1.0 --top-p 0.95 --top-k 50" "--temperature 0"; do
      # shellcheck disable=SC2086  # $sampling is a list of flags
      timeout 120 "$pack/bin/gs_$b" bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1,8,32,128 \
        --input-len 128 --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' \
        $sampling 2>/dev/null | grep -E '^FULL_AND_PIECEWISE +[0-9]' | awk -v t="r$round $b ${sampling%% *}" '{print t, $2, $3}'
    done
  done
done
