#!/usr/bin/env bash
# Expert parallelism on 2 GPUs (nvidia-h200-x2), in one call: dummy mixtures of experts at TP=1,
# TP=2 (experts sharded on their width) and TP=2 --enable-expert-parallel (whole experts a rank).
#  test    the MoE and TP GPU tests (MoeOps.*: the expert range's routing, sentinel pairs on
#          every kernel path; CudaTp.*);
#  graphs  decode ms/step, FULL_AND_PIECEWISE, at bs $EP_BS (1,4,16,64,128) for each layout;
#  greedy  48 greedy tokens of two prompts a layout, compared by tp_compare.py.
# MODELS="qwen3-30b-a3b mixtral-8x7b" picks the presets. Needs the pack of tools/gpu/pack.sh in
# $PACK (default .gpu).
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 GRAPHSERVE_LOG_LEVEL=warn
steps=" ${STEPS:-test graphs greedy} "
want() { [[ $steps == *" $1 "* ]]; }
models=${MODELS:-qwen3-30b-a3b mixtral-8x7b}
layouts=("1:" "2:" "2:--enable-expert-parallel")
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
if want test; then
  timeout 300 "$pack/bin/gs_test_cuda" --gtest_filter='MoeOps.*:CudaTp.*' >"$out/test_ep.log" 2>&1
  echo "gs_test_cuda MoeOps.*:CudaTp.*: exit $?"
  grep -E "^\[ +(FAILED|PASSED) +\]|Failure" "$out/test_ep.log" | tail -n 12
fi
for m in $models; do
  for l in "${layouts[@]}"; do
    tp=${l%%:*} extra=${l#*:} tag=tp$tp${extra:+ep}
    if want graphs; then
      # shellcheck disable=SC2086
      timeout 200 "$gs" bench graphs --preset "$m" --load-format dummy --max-num-seqs 128 --max-model-len 512 \
        "-cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128]" --tensor-parallel-size "$tp" $extra \
        --modes FULL_AND_PIECEWISE --batch-sizes "${EP_BS:-1,4,16,64,128}" --input-len 32 --output-len 16 \
        --num-iters 2 --output-png '' --output-json "$out/graphs_${m}_$tag.json" >"$out/graphs.txt" 2>"$out/graphs.log" ||
        { echo "bench $m $tag failed"; tail -n 5 "$out/graphs.log"; }
      grep -E "^FULL" "$out/graphs.txt" | grep -v capture | sed "s/^/$m $tag /"
    fi
    if want greedy; then
      # shellcheck disable=SC2086
      timeout 200 "$gs" generate --preset "$m" --load-format dummy --max-model-len 512 --tensor-parallel-size "$tp" \
        $extra --temperature 0 --ignore-eos --max-tokens 48 --logprobs 5 -p "The tensor-parallel model" \
        -p "Once upon a time" --output-json "$out/greedy_${m}_$tag.json" >/dev/null 2>"$out/greedy.log" ||
        { echo "generate $m $tag failed"; tail -n 5 "$out/greedy.log"; }
    fi
  done
  if want greedy; then
    python3 "$root/tools/gpu/tp_compare.py" "$out/greedy_${m}_tp1.json" "$out/greedy_${m}_tp2.json" "$m TP=2"
    python3 "$root/tools/gpu/tp_compare.py" "$out/greedy_${m}_tp1.json" "$out/greedy_${m}_tp2ep.json" "$m TP=2 -ep"
    python3 "$root/tools/gpu/tp_compare.py" "$out/greedy_${m}_tp2.json" "$out/greedy_${m}_tp2ep.json" "$m -ep vs TP=2"
  fi
done
