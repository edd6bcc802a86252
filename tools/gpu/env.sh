# Sourced by the device scripts: $root (the repository copy), $pack (the folder tools/gpu/pack.sh
# made, $PACK or .gpu), $out (the output folder, $OUT or gpu-logs, created) and $gs, with the
# pack's libraries and shared data on the paths. A script that runs from inside its pack folder
# sets PACK to that folder and sources "$PACK/../tools/gpu/env.sh" (the pack lies at the root of
# the repository copy the device runs in).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pack=${PACK:-$root/.gpu}
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared
gs=$pack/bin/graphserve

# archive_logs NAME: logs go to a scratch folder ($out from here on), packed on exit into
# NAME.tgz in the output folder (the device tool returns at most 8 files).
archive_logs() {
  local final=$out
  out=$(mktemp -d)
  # shellcheck disable=SC2064  # expand now: $final and $out are fixed at this point
  trap "tar czf '$final/$1.tgz' -C '$out' ." EXIT
}

# link_source_dir DIR: where the test binary's compiled-in data paths (DIR, the checkout it was
# built in) are missing on the device, link DIR to the repository copy.
link_source_dir() {
  if [[ -n "${1:-}" && ! -e $1 ]]; then
    mkdir -p "$(dirname "$1")" && ln -s "$root" "$1"
  fi
}
