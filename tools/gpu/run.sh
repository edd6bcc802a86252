#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, what tools/gpu/pack.sh put in the pack ($PACK, default .gpu):
# every packed test executable, then the per-op timings (graphserve bench ops), then any extra
# commands given as arguments (each run with the same environment, e.g. a graphserve bench).
# Logs go to $OUT (the device tool's folder) or ./gpu-logs; a short summary goes to stdout.
#
# Usage: tools/gpu/run.sh ['.gpu/bin/graphserve bench latency ...' ...]
#   GS_GPU_SKIP_TESTS=1, GS_GPU_SKIP_BENCH=1   skip a phase;  GS_TEST_FILTER=...   gtest filter
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pack=${PACK:-$root/.gpu}
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GRAPHSERVE_SHARED=$pack/shared
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
rc=0

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv \
  | tee "$out/gpu.txt"

if [[ -z "${GS_GPU_SKIP_TESTS:-}" ]]; then
  for t in "$pack"/bin/gs_test_*; do
    [[ -x $t ]] || continue
    name=$(basename "$t")
    timeout "${GS_TEST_TIMEOUT:-300}" "$t" --gtest_color=no --gtest_filter="${GS_TEST_FILTER:-*}" >"$out/$name.log" 2>&1
    status=$?
    echo "== $name: exit $status"
    grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error' "$out/$name.log" | grep -v '^\[  SKIPPED \] .*\.' | tail -n 40
    ((status != 0)) && rc=1
  done
fi

if [[ -z "${GS_GPU_SKIP_BENCH:-}" && -x $pack/bin/graphserve ]]; then
  echo "== op timings"
  timeout "${GS_BENCH_TIMEOUT:-300}" "$pack/bin/graphserve" bench ops --cases copy,linear,decode-step \
    >"$out/bench.log" 2>&1 || rc=1
  grep -E '\[bench\]|error' "$out/bench.log"
fi

i=0
for cmd in "$@"; do
  i=$((i + 1))
  echo "== extra $i: $cmd"
  (cd "$root" && eval "$cmd") >"$out/extra_$i.log" 2>&1 || rc=1
  tail -n 30 "$out/extra_$i.log"
done
exit $rc
