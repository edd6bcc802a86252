#!/usr/bin/env bash
# The issue-3 GPU check and benchmark in one device call (after tools/gpu/pack.sh, with the
# stories260K goldens copied into .gpu/shared/golden/stories260K):
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/graphs_bench.sh
# 1. every GPU test (ops, attention, graphs, the model vs HF and the CPU, all modes equal NONE);
# 2. bench graphs: modes x batch sizes on the llama3.2-1b and smollm2-135m shapes (prompt 128);
# 3. start-up time of the default mode (load, warm-up, capture) through `graphserve generate`.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-logs}
gs=.gpu/bin/graphserve
sweep="--modes NONE PIECEWISE FULL_DECODE_ONLY FULL_AND_PIECEWISE FULL --input-len 128 --output-len 32 --num-iters 5"
GS_GPU_SKIP_BENCH=1 bash tools/gpu/run.sh \
  "$gs bench graphs --load-format dummy --preset llama3.2-1b --batch-sizes 1 8 32 128 $sweep --max-num-batched-tokens 4096 --output-json $out/graphs_llama3.2-1b.json --output-png ''" \
  "$gs bench graphs --load-format dummy --preset smollm2-135m --batch-sizes 1 128 $sweep --max-num-batched-tokens 4096 --output-json $out/graphs_smollm2-135m.json --output-png ''" \
  "/usr/bin/time -f 'wall %e s, max rss %M KiB' $gs --log-level info generate --load-format dummy --preset llama3.2-1b --prompt 'Hello' --max-tokens 64 --ignore-eos --temperature 0"
