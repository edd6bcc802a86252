# Sourced by the device scripts: $root (the repository copy), $pack (the folder tools/gpu/pack.sh
# made, $PACK or .gpu), $out (the output folder, $OUT or gpu-logs, created) and $gs, with the
# pack's libraries and shared data on the paths.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pack=${PACK:-$root/.gpu}
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared
gs=$pack/bin/graphserve
