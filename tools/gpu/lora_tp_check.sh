#!/usr/bin/env bash
# LoRA under tensor parallelism on the GPU machine: the server at TP=1 and at TP=2 with the same two
# random rank-16 adapters (all seven projections), the same greedy completions (top-5 logprobs)
# for each adapter and the base model, compared; then decode ms per step with the adapters at
# TP=1 and TP=2. Needs the pack of tools/gpu/pack.sh in $PACK and 2 GPUs (kind nvidia-h200-x2).
# LTP_PRESET (default llama3.2-1b) and LTP_SHAPE ("layers hidden intermediate q kv", its shapes).
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name --format=csv,noheader
preset=${LTP_PRESET:-llama3.2-1b}
adapters=${ADAPTERS:-/tmp/gs_lora_tp_adapters}
# shellcheck disable=SC2086
python3 "$(dirname "$0")/make_lora_adapters.py" "$adapters" 2 16 ${LTP_SHAPE:-16 2048 8192 2048 512} || exit 1
common=(--load-format dummy --preset "$preset" --max-model-len 512 --max-num-seqs 8 --enable-lora --max-loras 2
  --max-lora-rank 16 --lora-modules "a0=$adapters/a0" "a1=$adapters/a1")
for tp in 1 2; do
  port=$((8700 + tp))
  "$gs" serve "${common[@]}" --tensor-parallel-size "$tp" --port "$port" >"$out/serve_tp$tp.log" 2>&1 &
  pid=$!
  for _ in $(seq 120); do
    curl -sf "localhost:$port/health" >/dev/null && break
    sleep 1
  done
  for m in "$preset" a0 a1; do
    curl -s "localhost:$port/v1/completions" -H 'Content-Type: application/json' -d "{\"model\": \"$m\",
      \"prompt\": [1, 15, 92, 7, 301, 44, 9, 18], \"max_tokens\": 32, \"temperature\": 0, \"logprobs\": 5}" \
      >"$out/tp${tp}_$m.json"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null
done
python3 - "$out" "$preset" <<'PY'
import json, math, sys
out, preset = sys.argv[1], sys.argv[2]
for m in (preset, "a0", "a1"):
    a, b = (json.load(open(f"{out}/tp{tp}_{m}.json")) for tp in (1, 2))
    if "choices" not in a or "choices" not in b:
        print(m, "error:", a.get("error", a) if "choices" not in a else b.get("error", b))
        continue
    la, lb = a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]
    ta, tb = la["tokens"], lb["tokens"]
    div = next((i for i in range(min(len(ta), len(tb))) if ta[i] != tb[i]), None)
    n = div if div is not None else len(ta)
    num = sum((x - y) ** 2 for x, y in zip(la["token_logprobs"][:n], lb["token_logprobs"][:n]))
    den = sum(x * x for x in la["token_logprobs"][:n])
    print(f"{m:12s} TP=2 vs TP=1: {len(ta)} tokens, first divergence {div}, token logprobs rel-L2 "
          f"{math.sqrt(num / den) if den else float('nan'):.2e} over {n}")
base = json.load(open(f"{out}/tp1_{preset}.json"))["choices"][0]["text"]
for m in ("a0", "a1"):
    print(m, "differs from the base model at TP=1:", json.load(open(f"{out}/tp1_{m}.json"))["choices"][0]["text"] != base)
PY
for tp in 1 2; do
  # shellcheck disable=SC2086
  timeout 150 "$gs" bench latency "${common[@]}" --tensor-parallel-size "$tp" --input-len 32 --output-len 32 \
    --num-iters 2 --batch-size 8 --lora-spread 0 1 2 2>/dev/null | grep -E "decode / step|spread|LoRA" | sed "s/^/TP=$tp /"
done
