#!/usr/bin/env bash
# The device tool's entry for tools/gpu/tp_bench.sh on a multi-GPU kind: run from the pack folder
# (tools/gpu/pack.sh; copy tp_run.sh, tp_bench.sh, env.sh and tp_compare.py into it) at the root of
# the repository copy, e.g. `bash .gpu/tp_run.sh`; every log goes into one archive under $OUT (the
# tool brings back a few files only), the summary to stdout.
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
cd "$pack/.." || exit
logs=$(mktemp -d)
PACK=$pack OUT=$logs TPS=${TPS:-2} SWEEP=${SWEEP-4,8,16,64} timeout "${TP_LIMIT:-400}" bash "$pack/tp_bench.sh" 2>&1 | tee "$logs/summary.txt"
tar czf "${OUT:-.}/tp_logs.tgz" -C "$logs" .
cp "$logs/summary.txt" "${OUT:-.}/summary.txt"
