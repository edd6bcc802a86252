#!/usr/bin/env bash
# The deferred norm (issue 8) at bs 1: ncu of the gated GEMV with the norm fused (NormedRow) and plain
# (GS_NORM_FUSION=0) on llama3.2-1b, and bench kernels of both, prompt 128 (dummy weights).
#   device run, kind nvidia-h200, carry [".gpu-pack"], command:
#   python3 -c "import tarfile; tarfile.open('.gpu-pack/gpu.tar.xz').extractall()" && bash tools/gpu/norm_fusion_ab.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=warn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
one() {  # one <tag> <preset> <layers> [env...]
  local tag=$1 preset=$2 layers=$3; shift 3
  env "$@" timeout 240 ncu --clock-control none --kernel-name-base demangled -k 'regex:gemv_kernel<.*Gated' \
    --launch-skip $((2 * layers)) --launch-count 1 --set full "$gs" bench latency --enforce-eager --load-format dummy \
    --preset "$preset" --batch-size 1 --input-len 128 --output-len 8 --num-iters 1 --num-iters-warmup 0 \
    >"$out/ncu_$tag.txt" 2>&1
  echo "== $tag ($preset $*): exit $?"
  grep -E '^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|Issued Ipc|Executed Ipc|One or More Eligible|Active Warps Per|L2 Cache Throughput|L1/TEX Cache Throughput' \
    "$out/ncu_$tag.txt" | head -30
  grep -E 'Est. Speedup|stalled|Stall' "$out/ncu_$tag.txt" | head -8
}
one fused llama3.2-1b 16
one plain llama3.2-1b 16 GS_NORM_FUSION=0
for v in default GS_NORM_FUSION=0; do
  echo "== bench kernels llama3.2-1b bs 1 ($v)"
  env GS_AB_NONE=1 ${v/default/} timeout 100 "$gs" bench kernels --load-format dummy --preset "${KERNELS_PRESET:-llama3.2-1b}" \
    --batch-sizes 1 --top 8 2>/dev/null | grep -vE '^(device|own us:)'
done
