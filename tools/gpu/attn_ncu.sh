#!/usr/bin/env bash
# ncu (full set) of the decode attention kernel on the issue-8 shapes: one eager decode step's launch of
# llama3.2-1b at bs 1 and 128 and qwen3-0.6b at bs 1, prompt 128 (dummy weights), plus its
# serialized duration (gpu__time_duration) against the same step's QKV projection and norm.
#   device run, kind nvidia-h200, carry [".gpu-pack"], command:
#   python3 -c "import tarfile; tarfile.open('.gpu-pack/gpu.tar.xz').extractall()" && bash tools/gpu/attn_ncu.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root"
export GRAPHSERVE_LOG_LEVEL=warn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
kname=${ATTN_KERNEL:-'regex:prefill_attention_kernel<\(int\)(64|128), \(int\)1, \(bool\)0, \(bool\)1|decode_warp_kernel'}
one() {  # one <tag> <preset> <layers> <bs> [env...]
  local tag=$1 preset=$2 layers=$3 bs=$4; shift 4
  # The prefill's launches (another instance) do not match; the start-up profile run may: skip 2 x layers
  # launches, which lands in a decode step either way.
  env "$@" timeout 240 ncu --clock-control none --kernel-name-base demangled -k "$kname" --launch-skip $((2 * layers)) \
    --launch-count 1 --set full "$gs" bench latency --enforce-eager --load-format dummy --preset "$preset" \
    --batch-size "$bs" --input-len 128 --output-len 8 --num-iters 1 --num-iters-warmup 0 >"$out/ncu_$tag.txt" 2>&1
  echo "== $tag ($preset bs $bs $*): exit $?"
  grep -E '^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issued Ipc|Waves Per SM|Grid Size|Dynamic Shared|One or More Eligible|Active Warps Per' \
    "$out/ncu_$tag.txt" | head -40
  grep -E 'Est. Speedup|stalled|Stall' "$out/ncu_$tag.txt" | head -12
}
one l1b_bs1 llama3.2-1b 16 1
one l1b_bs128 llama3.2-1b 16 128
one l1b_bs32 llama3.2-1b 16 32
one qwen_bs1 qwen3-0.6b 28 1
