#!/usr/bin/env bash
# Sampling on the GPU (issue 7) in one device call, after
#   GS_GPU_NO_BUILD=1 tools/gpu/pack.sh build/release && cp -r ../shared/golden/stories260K .gpu/shared/golden/
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/sampling_bench.sh
# 1. every GPU test (the CUDA sampler against the CPU reference among them);
# 2. bench latency on llama3.2-1b at bs 1, 32, 128: greedy beside sampled, with the device-to-host
#    bytes per step and the captures after start-up;
# 3. bench throughput (256 prompts, 128 in / 128 out): greedy beside sampled;
# 4. generate of 256 tokens, one request: greedy beside temperature 0.8, top_p 0.95.
# Logs and JSON go to $OUT (tests.log, bench.log, results.jsonl); a table is printed last.
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}
model="--load-format dummy --preset ${GS_PRESET:-llama3.2-1b}"
sampled="--temperature 1.0 --top-p 0.95 --top-k 50"
log=$out/bench.log
: >"$log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$log"

if [[ -z "${GS_SKIP_TESTS:-}" ]]; then
  timeout 400 .gpu/bin/gs_test_cuda --gtest_color=no >"$out/tests.log" 2>&1
  echo "== gs_test_cuda: exit $?"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]|Failure' "$out/tests.log" | tail -n 30
fi

# One line of results.jsonl: {"bench", "kind", ...extra, "result": the JSON file's content}.
row() {
  python3 -c 'import json, sys
r = json.loads(sys.argv[1]); r["result"] = json.load(open(sys.argv[2])) if sys.argv[2] else None
print(json.dumps(r))' "$1" "$2" >>"$out/results.jsonl"
}
for bs in ${GS_BATCH_SIZES:-1 32 128}; do
  for kind in greedy sampled; do
    flags=""; [[ $kind == sampled ]] && flags=$sampled
    rm -f "$out/lat.json"
    $gs bench latency $model --batch-size "$bs" --input-len 128 --output-len 128 --num-iters 3 $flags \
      --output-json "$out/lat.json" >>"$log" 2>&1 || echo "latency bs $bs $kind failed"
    row "{\"bench\":\"latency\",\"kind\":\"$kind\",\"bs\":$bs}" "$out/lat.json"
  done
done
rm -f "$out/lat.json"
for kind in greedy sampled; do
  flags="--temperature 0"; [[ $kind == sampled ]] && flags=$sampled
  rm -f "$out/tp.json"
  $gs bench throughput $model --num-prompts 256 --input-len 128 --output-len 128 $flags \
    --output-json "$out/tp.json" >>"$log" 2>&1 || echo "throughput $kind failed"
  row "{\"bench\":\"throughput\",\"kind\":\"$kind\"}" "$out/tp.json"
done
rm -f "$out/tp.json"
for kind in greedy sampled; do
  flags="--temperature 0"; [[ $kind == sampled ]] && flags="--temperature 0.8 --top-p 0.95"
  line=$($gs generate $model --prompt Hello --max-tokens 256 --ignore-eos $flags 2>&1 >/dev/null | grep 'decode:')
  echo "generate $kind: $line" | tee -a "$log"
done

python3 - "$out/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
lat = {(r["kind"], r["bs"]): r["result"] for r in rows if r["bench"] == "latency" and r["result"]}
print(f"{'bs':>4} {'greedy ms':>10} {'sampled ms':>11} {'ratio':>6} {'d2h B/step':>11} {'late captures':>14}")
for bs in sorted({b for _, b in lat}):
    g, s = lat.get(("greedy", bs)), lat.get(("sampled", bs))
    if g and s:
        print(f"{bs:>4} {g['decode_ms_median']:>10.3f} {s['decode_ms_median']:>11.3f} "
              f"{s['decode_ms_median'] / g['decode_ms_median']:>6.3f} {s['d2h_bytes_per_step']:>11.0f} "
              f"{s['graph_captures_after_startup']:>14}")
tp = {r["kind"]: r["result"] for r in rows if r["bench"] == "throughput" and r["result"]}
if len(tp) == 2:
    g, s = tp["greedy"]["output_tokens_per_second"], tp["sampled"]["output_tokens_per_second"]
    print(f"throughput output tok/s: greedy {g:.0f}, sampled {s:.0f} ({s / g:.3f})")
PY
