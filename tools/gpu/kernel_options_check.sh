#!/usr/bin/env bash
# Issue 32 (kernel options, attention kernel selection): every GPU test of this build, then decode
# steps of the base build against this one, interleaved (bench graphs FULL_AND_PIECEWISE, prompt 128).
# Runs from a pack folder made by pack.sh (GS_GPU_PACK=<dir>) with the base binary copied in as
# <dir>/bin/gs_base (the new one is <dir>/bin/graphserve):
#   device run, kind nvidia-h200, carry ["<dir>"], command: bash <dir>/kernel_options_check.sh
#   KC_TEST_S   seconds for gs_test_cuda (default 150)
#   KC_SHAPES   preset:batch,sizes words (default "llama3.2-1b:1,32,128 llama3.1-8b:1,128")
#   KC_SOURCE_DIR  the checkout the tests were built in, linked to the repository copy if missing
set -uo pipefail
PACK=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/gpu/env.sh
source "$PACK/../tools/gpu/env.sh"
cd "$root" || exit
link_source_dir "${KC_SOURCE_DIR:-}"  # the checkout the tests were built in (their data paths)
export GRAPHSERVE_LOG_LEVEL=warn GS_FAMILY_FIXTURES=$root/tests/data/families
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in 1 2; do
  for b in gs_base graphserve; do
    for shape in ${KC_SHAPES:-llama3.2-1b:1,32,128 llama3.1-8b:1,128}; do
      timeout 120 "$pack/bin/$b" bench graphs --load-format dummy --preset "${shape%%:*}" --batch-sizes "${shape#*:}" \
        --input-len 128 --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' \
        2>/dev/null | grep -E '^FULL_AND_PIECEWISE +[0-9]' | awk -v t="r$round $b ${shape%%:*}" '{print t, $2, $3}'
    done
  done
  [[ -n "${KC_ONE_ROUND:-}" ]] && break
done
timeout "${KC_TEST_S:-150}" "$pack/bin/gs_test_cuda" --gtest_color=no >/tmp/kc_tests.log 2>&1
echo "== gs_test_cuda: exit $? (124: cut at ${KC_TEST_S:-150} s)"
grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|^\[ RUN      \]' /tmp/kc_tests.log | grep -v '^\[ RUN' | tail -n 30
grep -c '^\[       OK \]' /tmp/kc_tests.log | sed 's/^/tests passed: /'
grep -E '^\[  FAILED  \]|Failure' /tmp/kc_tests.log | head -n 20
