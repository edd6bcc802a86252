#!/usr/bin/env bash
# The driver <-> worker round trip on ONE GPU: the same model in this process (uni), in a worker
# process stepping over shared memory (mp: the default for ranks that spin), and over TCP
# (mp, GRAPHSERVE_TP_SHM=0); bench graphs FULL_AND_PIECEWISE, prompt 128, two rounds in turn, with
# the driver's per-step time split (encode + send, runner, decode, transport) for mp.
#   TT_SHAPES  preset:batch,sizes words (default "llama3.2-1b:1,32,128 llama3.1-8b:1,32,128")
#   device run, kind nvidia-h200, carry [".gpu-pack"] or [".gpu"] (tools/gpu/pack.sh), command:
#   bash tools/gpu/tp_transport_ab.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in 1 2; do
  for v in uni mp-shm mp-tcp; do
    for shape in ${TT_SHAPES:-llama3.2-1b:1,32,128 llama3.1-8b:1,32,128}; do
      shm=1 && [[ $v == mp-tcp ]] && shm=0
      GRAPHSERVE_TP_SHM=$shm GRAPHSERVE_LOG_LEVEL=info timeout 150 "$gs" bench graphs --load-format dummy \
        --preset "${shape%%:*}" --batch-sizes "${shape#*:}" --input-len 128 --output-len 32 --num-iters 5 \
        --modes FULL_AND_PIECEWISE --output-png '' --output-json '' --distributed-executor-backend "${v%%-*}" 2>&1 |
        grep -E '^FULL_AND_PIECEWISE +[0-9]|tensor parallel: [0-9]+ steps|error' |
        sed -e "s|^.*tensor parallel: |  |" -e "s|^|r$round $v ${shape%%:*} |"
    done
  done
done
