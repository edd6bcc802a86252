#!/usr/bin/env bash
# Tensor parallelism on a multi-GPU machine (nvidia-h200-x2 / -x4), in one call:
#  1. topology (nvidia-smi topo -m) and `graphserve bench all-reduce`: latency per message size,
#     NCCL vs the custom one-shot / two-shot all-reduce, inside CUDA graphs;
#  2. dummy llama3.1-8b greedy, 128 tokens, TP=1 vs TP=N: first divergence and the rel-L2 of the
#     sampled tokens' top-5 logprobs (graphserve generate --output-json, compared by tp_compare.py);
#  3. decode ms/step at bs 1, 32, 128 for TP=1 and TP=N in FULL_AND_PIECEWISE and NONE
#     (graphserve bench graphs);
#  4. the multi-host path: two single-GPU "hosts" (CUDA_VISIBLE_DEVICES 0 and 1, a `graphserve
#     worker --node-rank 1` process, --master-addr 127.0.0.1) vs TP=2 on one host (llama3.2-1b);
#  5. TP=N with --disable-custom-all-reduce (NCCL only): FULL_AND_PIECEWISE ms/step and graph memory;
#  6. SWEEP="4,8,16,64" (optional): FULL_AND_PIECEWISE ms/step at more batch sizes, TP=1 and TP=N.
# Needs the pack of tools/gpu/pack.sh in $PACK (default .gpu). TPS="2" (or "2 4") picks the sizes.
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
tps=${TPS:-2}
preset=${PRESET:-llama3.1-8b}
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -n 6
for tp in $tps; do
  echo "== all-reduce latency, $tp GPUs"
  timeout 90 "$gs" bench all-reduce --tensor-parallel-size "$tp" --output-json "$out/allreduce_tp$tp.json" \
    2>"$out/allreduce_tp$tp.log" || { echo "bench all-reduce failed"; tail -n 5 "$out/allreduce_tp$tp.log"; }
done
common="--load-format dummy --max-num-seqs 128 --max-model-len 512 -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128]"

echo "== greedy 128 tokens, $preset, TP=1 vs TP=N"
for tp in 1 $tps; do
  # shellcheck disable=SC2086
  timeout 150 "$gs" generate --preset "$preset" $common --tensor-parallel-size "$tp" --temperature 0 --ignore-eos \
    --max-tokens 128 --logprobs 5 -p "The tensor-parallel model" -p "Once upon a time" \
    --output-json "$out/gen_tp$tp.json" >/dev/null 2>"$out/gen_tp$tp.log" || { echo "generate tp $tp failed"; tail -n 5 "$out/gen_tp$tp.log"; }
  grep -E "all-reduce:|decode:" "$out/gen_tp$tp.log" | sed 's/^\[[^]]*\] //' | head -n 6
done
for tp in $tps; do python3 "$(dirname "$0")/tp_compare.py" "$out/gen_tp1.json" "$out/gen_tp$tp.json" "TP=$tp"; done

echo "== decode ms/step, $preset"
for tp in 1 $tps; do
  # shellcheck disable=SC2086
  timeout 170 "$gs" bench graphs --preset "$preset" $common --tensor-parallel-size "$tp" --modes NONE,FULL_AND_PIECEWISE \
    --batch-sizes 1,32,128 --input-len 32 --output-len 16 --num-iters 1 --output-json "$out/graphs_tp$tp.json" \
    --output-png '' >"$out/graphs_tp$tp.txt" 2>"$out/graphs_tp$tp.log" || { echo "bench tp $tp failed"; tail -n 5 "$out/graphs_tp$tp.log"; }
  echo "-- TP=$tp"; cat "$out/graphs_tp$tp.txt"
done

echo "== two single-GPU hosts vs one host, TP=2, llama3.2-1b"
small="--preset llama3.2-1b $common --temperature 0 --ignore-eos --max-tokens 64 --logprobs 5 -p Hello"
# shellcheck disable=SC2086
timeout 100 "$gs" generate $small --tensor-parallel-size 2 --output-json "$out/host1.json" >/dev/null 2>"$out/host1.log"
port=29517
CUDA_VISIBLE_DEVICES=1 timeout 100 "$gs" worker --nnodes 2 --node-rank 1 --tensor-parallel-size 2 --master-addr 127.0.0.1 \
  --master-port $port 2>"$out/node1.log" &
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=0 timeout 100 "$gs" generate $small --tensor-parallel-size 2 --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
  --master-port $port --output-json "$out/host2.json" >/dev/null 2>"$out/node0.log"
wait
python3 "$(dirname "$0")/tp_compare.py" "$out/host1.json" "$out/host2.json" "two hosts vs one"

echo "== TP=N, NCCL only (--disable-custom-all-reduce), $preset"
for tp in $tps; do
  # shellcheck disable=SC2086
  timeout 120 "$gs" bench graphs --preset "$preset" $common --tensor-parallel-size "$tp" --disable-custom-all-reduce \
    --modes FULL_AND_PIECEWISE --batch-sizes 1,32,128 --input-len 32 --output-len 16 --num-iters 1 \
    --output-json '' --output-png '' >"$out/graphs_tp${tp}_nccl.txt" 2>"$out/graphs_tp${tp}_nccl.log" || echo "nccl-only failed"
  echo "-- TP=$tp NCCL only"; cat "$out/graphs_tp${tp}_nccl.txt"
done
grep -h "all-reduce:" "$out"/node0.log "$out"/node1.log 2>/dev/null | sed 's/^\[[^]]*\] //' | head -n 2
if [[ -n "${SWEEP:-}" ]]; then
  echo "== FULL_AND_PIECEWISE ms/step at batch sizes $SWEEP"
  for tp in 1 $tps; do
    # shellcheck disable=SC2086
    timeout 120 "$gs" bench graphs --preset "$preset" $common --tensor-parallel-size "$tp" --modes FULL_AND_PIECEWISE \
      --batch-sizes "$SWEEP" --input-len 32 --output-len 16 --num-iters 1 --output-json '' --output-png '' \
      2>"$out/sweep_tp$tp.log" | grep -E "^FULL_AND_PIECEWISE +[0-9]" | sed "s/^/TP=$tp /"
  done
fi
