#!/usr/bin/env bash
# moe_floors.sh GRAPHSERVE PRESET...: the weight bytes a decode step of each MoE preset reads at
# bs 1 / 32 / 128 over the card's bandwidth: every dense weight (the embedding table counted
# whole) + the experts the step touches, their expected count under uniform routing,
# E (1 - (1 - k / E)^bs) a layer. E and k come from `graphserve info`'s active-parameters line.
set -uo pipefail
gs=$1
shift
bw=3350
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && bw=4800
for preset in "$@"; do
  "$gs" info --preset "$preset" 2>/dev/null | awk -v p="$preset" -v bw="$bw" '
    /^parameters:/ {tot=$2}
    /^active parameters/ {act=$5; E=$7; k=$13 + 0}  # ... N (xB; E experts of width I, top k)
    END {
      if (!E) { print p ": no experts line in graphserve info"; exit }
      ex = (tot - act) / (E - k) * E; dense = tot - ex;
      for (b = 1; b <= 128; b *= (b == 1 ? 32 : 4)) { touched = E * (1 - (1 - k / E) ^ b);
        bytes = 2 * (dense + ex * touched / E);
        printf "%s floor bs %d: %.2f GB (%.1f of %d experts a layer) = %.3f ms at %d GB/s\n",
               p, b, bytes / 1e9, touched, E, bytes / bw / 1e6, bw } }'
done
