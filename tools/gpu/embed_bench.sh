#!/usr/bin/env bash
# Issue 31's embeddings throughput: `graphserve bench embed` (pooling runner, last-token pooling,
# L2-normalised) beside HF transformers (Qwen3Model, SDPA, bf16, the same pooling) on the
# Qwen3-0.6B shape with random weights: 64 sequences of 512 tokens, in the same call.
# Pack (on the build machine), then run from the pack folder:
#   GS_GPU_NO_BUILD=1 GS_GPU_TARGETS="graphserve" GS_GPU_PACK=<repo>/.gpu-parity tools/gpu/pack.sh build/release
#   cp tools/gpu/embed_bench.sh tools/gpu/hf_embed.py <repo>/.gpu-parity/
#   device run, kind nvidia-h200, carry [".gpu-parity"], timeout_s 300,
#   command: bash .gpu-parity/embed_bench.sh
# Prints one line per configuration; JSON results go to $OUT.
set -uo pipefail
PACK=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/gpu/env.sh
source "$PACK/../tools/gpu/env.sh"
export GRAPHSERVE_LOG_LEVEL=warn PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for budget in 8192 32768; do
  echo "== graphserve bench embed, --max-num-batched-tokens $budget"
  timeout 200 "$gs" bench embed --load-format dummy --preset qwen3-0.6b --batch-size 64 --input-len 512 \
    --max-num-seqs 64 --max-num-batched-tokens "$budget" --num-iters 10 --output-json "$out/embed_$budget.json"
done
"$gs" info --preset qwen3-0.6b >"$out/qwen3-0.6b.txt"
echo "== HF transformers (Qwen3Model, sdpa, bf16)"
timeout 200 python3 "$PACK/hf_embed.py" "$out/qwen3-0.6b.txt" 64 512
