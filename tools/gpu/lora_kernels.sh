#!/usr/bin/env bash
# Per-kernel decode time with LoRA (graphserve bench kernels --lora-spread 8: rows over 8 adapters),
# dummy llama3.2-1b, 8 random rank-16 adapters on all seven projections, bs 1 and 32, for each
# variant of VARIANTS ("default" or VAR=value, as tools/gpu/lora_ab.sh). Pack as
# tools/gpu/lora_run.sh says, copy this script beside it, run `bash .gpu-lora/lora_kernels.sh`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PACK=$here
# shellcheck source=tools/gpu/env.sh
source "$here/env.sh"
adapters=/tmp/gs_lora_adapters
[[ -d $adapters/a7 ]] || python3 "$here/make_lora_adapters.py" "$adapters" 8 16 16 2048 8192 2048 512 >/dev/null || exit 1
mods=()
for i in 0 1 2 3 4 5 6 7; do mods+=("a$i=$adapters/a$i"); done
for v in ${VARIANTS:-default}; do
  echo "== $v"
  IFS=+ read -ra kv <<<"${v/default/GS_LORA_AB=default}"
  env "${kv[@]}" timeout 200 "$gs" bench kernels --load-format dummy --preset llama3.2-1b \
    --input-len 32 --output-len 17 --max-num-seqs 128 --max-model-len 256 \
    -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128] --batch-sizes "${BATCH_SIZES:-1,32}" --enable-lora \
    --max-loras 8 --max-lora-rank 16 --max-cpu-loras 8 --lora-modules "${mods[@]}" --lora-spread 8 --top 24 \
    2>>"$out/kernels.log" | cut -c1-150
done
