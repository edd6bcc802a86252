# Sourced by the decode device scripts (attn_decode.sh, attn_batch.sh) from their pack folder:
# the environment (env.sh), the repository copy as working directory, and the helpers graphs /
# kernels (bench graphs / bench kernels on dummy weights, A/B environment words prefixed to each
# row) and tests (gs_test_cuda into $out/tests.log, its summary on stdout).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PACK=${PACK:-$here}
# shellcheck source=tools/gpu/env.sh
source "$here/env.sh"
cd "$(dirname "$here")"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} GS_FAMILY_FIXTURES=$PWD/tests/data/families
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

graphs() {  # graphs <preset> <batch sizes> <input len> <modes> [env words...]
  local preset=$1 bs=$2 len=$3 modes=$4; shift 4
  env GS_AB_NONE=1 "$@" timeout 150 "$gs" bench graphs --load-format dummy --preset "$preset" --batch-sizes "$bs" \
    --input-len "$len" --output-len 32 --num-iters 5 --modes "$modes" --output-png '' --output-json '' 2>/dev/null |
    grep -E '^(NONE|FULL)' | grep -v 'capture 0.00 s' | sed "s/^/  $preset p$len $* | /"
}
kernels() {  # kernels <preset> <batch sizes> <input len> <top> [env words...]
  local preset=$1 bs=$2 len=$3 top=$4; shift 4
  env GS_AB_NONE=1 "$@" timeout 150 "$gs" bench kernels --load-format dummy --preset "$preset" --batch-sizes "$bs" \
    --input-len "$len" --top "$top" 2>/dev/null | grep -vE '^(own us|device)'
}
tests() {  # tests <timeout> [gtest filter]
  timeout "$1" "$pack/bin/gs_test_cuda" --gtest_color=no ${2:+--gtest_filter=$2} >"$out/tests.log" 2>&1
  echo "== gs_test_cuda ${2:-(all)}: exit $?"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]|Failure|error' "$out/tests.log" | tail -n 20
}
