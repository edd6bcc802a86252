#!/usr/bin/env bash
# The device tool's entry for tools/gpu/tp_bench.sh (or SCRIPT=tp_diag.sh): run from a pack folder
# (.gpu-tp/run.sh, next to tp_bench.sh, tp_diag.sh, env.sh, tp_compare.py and tp_trace.py) in the
# repository root copy; every log goes into one archive under $OUT (the tool brings back a few
# files only), the summary to stdout.
set -uo pipefail
pack=$(cd "$(dirname "$0")" && pwd)
cd "$pack/.."
logs=$(mktemp -d)
PACK=$pack OUT=$logs TPS=${TPS:-2} SWEEP=${SWEEP-4,8,16,64} timeout "${TP_LIMIT:-400}" bash "$pack/${SCRIPT:-tp_bench.sh}" 2>&1 | tee "$logs/summary.txt"
tar czf "${OUT:-.}/tp_logs.tgz" -C "$logs" .
cp "$logs/summary.txt" "${OUT:-.}/summary.txt"
