#!/usr/bin/env bash
# Issue 8, bs-128 decode attention (branch attn2): A/B of the warp-per-pair decode kernel's shapes
# (GS_TC_WARP_W warps a pair, GS_TC_WARP_KEYS keys a slot's round) against the tensor-core decode
# kernel (GS_TC_WARP_PAIRS=0), bench graphs FULL_AND_PIECEWISE, no tests. Pack as attn2_bench.sh does
# (graphserve alone is enough) and copy this script beside it.
set -uo pipefail
# shellcheck source=tools/gpu/decode_fns.sh
source "$(cd "$(dirname "$0")" && pwd)/decode_fns.sh"
F=FULL_AND_PIECEWISE
{
  # (D 64 runs the warp kernel only when GS_TC_WARP_PAIRS is set: 512 is the default threshold)
  for v in GS_TC_WARP_PAIRS=0 GS_TC_WARP_W=1 GS_TC_WARP_W=2,GS_TC_WARP_KEYS=4 GS_TC_WARP_W=2 \
    GS_TC_WARP_W=4,GS_TC_WARP_KEYS=4; do
    [[ $v != GS_TC_WARP_PAIRS=0 ]] && v=$v,GS_TC_WARP_PAIRS=512
    graphs llama3.2-1b 64,128 128 $F $(tr , ' ' <<<"$v")
  done
  for v in GS_TC_WARP_PAIRS=0 GS_TC_WARP_W=4,GS_TC_WARP_KEYS=4,GS_TC_WARP_PAIRS=512; do
    graphs llama3.2-1b 128 4096 $F $(tr , ' ' <<<"$v")
  done
  for v in GS_TC_WARP_PAIRS=0 GS_TC_WARP_W=1 GS_TC_WARP_W=2 GS_TC_WARP_W=4; do
    graphs qwen3-0.6b 64,128 128 $F "$v"
  done
  for v in GS_TC_WARP_PAIRS=0 GS_TC_WARP_W=1; do graphs qwen3-0.6b 128 4096 $F "$v"; done
} 2>&1 | tee "$out/ab.txt"
