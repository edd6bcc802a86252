#!/usr/bin/env bash
# Online serving on the GPU: `graphserve serve` on a dummy preset, driven by `graphserve bench
# serve` at a fixed concurrency. Run after tools/gpu/pack.sh, on the device machine:
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/serve_bench.sh [LABEL [SERVE FLAGS...]]
# Default: LABEL llama3.2-1b, flags --load-format dummy --preset llama3.2-1b.
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
preset=${1:-llama3.2-1b}
shift || true
model=("$@")
((${#model[@]})) || model=(--load-format dummy --preset "$preset")
port=8011
$gs serve "${model[@]}" --port $port --max-num-seqs 128 >"$out/serve_$preset.log" 2>&1 &
server=$!
get() { python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1]).read().decode())" "$1"; }
for _ in $(seq 120); do get "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.5; done
for c in 1 32; do
  echo "== $preset, concurrency $c"
  timeout 240 $gs bench serve --base-url "http://127.0.0.1:$port" --num-prompts $((c == 1 ? 16 : 256)) \
    --input-len 128 --output-len 128 --max-concurrency $c --output-json "$out/serve_${preset}_c$c.json" 2>&1 | tail -n 22
done
get "http://127.0.0.1:$port/metrics" | grep -E '^graphserve_(cuda_graphs|graph_|forward_steps)' | head -n 8
kill -TERM $server; wait $server; echo "server exit $?"
