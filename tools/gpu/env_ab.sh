#!/usr/bin/env bash
# A/B of environment switches (no rebuild) on decode steps: bench graphs FULL_AND_PIECEWISE, prompt 128,
# each variant run AB_ROUNDS times in turn (A B A B ...) so drift between runs shows; then an optional
# gs_test_cuda filter (AB_TESTS) first.
#   GS_AB      variants: "default" or NAME=VALUE[,NAME=VALUE] words (default: "default GRAPHSERVE_TP_SHM=0"; kernel variants are KernelOptions fields, reached by the tests)
#   AB_SHAPES  preset:batch,sizes words (default: "llama3.2-1b:1,32 smollm2-135m:1 qwen3-0.6b:1")
#   device run, kind nvidia-h200, carry [".gpu"] (tools/gpu/pack.sh), command: bash tools/gpu/env_ab.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
export GRAPHSERVE_LOG_LEVEL=warn GS_FAMILY_FIXTURES=$root/tests/data/families
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ -n "${AB_TESTS:-}" ]]; then
  timeout 300 "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="$AB_TESTS" >"$out/tests.log" 2>&1
  echo "== gs_test_cuda $AB_TESTS: exit $?"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]' "$out/tests.log" | tail -n 12
fi
for round in $(seq "${AB_ROUNDS:-2}"); do
  for v in ${GS_AB:-default GRAPHSERVE_TP_SHM=0}; do
    vars=GS_AB_NONE=1
    [[ $v != default ]] && vars=${v//,/ }
    for shape in ${AB_SHAPES:-llama3.2-1b:1,32 smollm2-135m:1 qwen3-0.6b:1}; do
      # shellcheck disable=SC2086  # $vars is a list of NAME=VALUE words
      env $vars timeout 120 "$gs" bench graphs --load-format dummy --preset "${shape%%:*}" \
        --batch-sizes "${shape#*:}" --input-len 128 --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE \
        --output-png '' --output-json '' 2>/dev/null | grep -E '^FULL_AND_PIECEWISE +[0-9]' |
        sed "s|^|r$round $v ${shape%%:*} |"
    done
  done
done
