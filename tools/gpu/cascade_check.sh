#!/usr/bin/env bash
# Issue 30's GPU check in one device call, from a pack folder (tools/gpu/pack.sh with
# GS_GPU_TARGETS="graphserve gs_test_cuda", binaries optionally xz-compressed as bin/NAME.xz, this
# script and prefix_bench.sh copied into it):
#   1. the cascade and tensor-core attention GPU tests (CascadeAttention.*, PrefillAttention.*:
#      the latter's float64 host references take a few minutes);
#   2. prefix_bench.sh's phases (default "ops cascade chunk"; CC_PHASES overrides).
# Usage (device run, carry [".gpu-<name>"]): bash .gpu-<name>/cascade_check.sh
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared
out=${OUT:-$pack/../gpu-logs}
mkdir -p "$out"
timeout "${CC_TEST_TIMEOUT:-240}" "$pack/bin/gs_test_cuda" --gtest_filter='CascadeAttention.*:PrefillAttention.*' \
  >"$out/attention_tests.log" 2>&1
echo "attention tests: exit $?"
grep -E '^\[(       OK|  FAILED  |  PASSED  )\]|Failure' "$out/attention_tests.log" | head -40
GS_PHASES=${CC_PHASES:-ops cascade chunk} bash "$pack/prefix_bench.sh"
