#!/usr/bin/env bash
# Tensor parallelism on a multi-GPU machine (nvidia-h200-x2 / -x4), in one call. STEPS picks the
# parts (default: all but kernels and sweep):
#  test       the GPU TP tests (gs_test_cuda --gtest_filter='CudaTp.*': the fused all-reduce +
#             residual add + RMSNorm vs the two ops on two GPUs);
#  allreduce  topology (nvidia-smi topo -m) and `graphserve bench all-reduce`: latency per message
#             size, NCCL vs the custom one-shot / two-shot all-reduce, inside CUDA graphs, then the
#             fused all-reduce + add + norm vs the two ops per row count;
#  greedy     dummy llama3.1-8b greedy, 128 tokens, TP=1 vs TP=N: first divergence and the rel-L2 of
#             the sampled tokens' top-5 logprobs (graphserve generate --output-json, tp_compare.py)
#             (the fused all-reduce kernel's two forms are compared by the CudaTp tests; GREEDY_FLAGS
#             adds flags to both runs, e.g. --all-reduce-in-projection);
#  graphs     decode ms/step at bs 1, 32, 128 for TP=1 and TP=N in FULL_AND_PIECEWISE and NONE
#             (graphserve bench graphs), then in FULL_AND_PIECEWISE TP=N with
#             GRAPHSERVE_TP_SPIN_MS=$SPIN_MS (TP_VARIANTS "s"; 0: sockets not busy-polled) and with
#             --all-reduce-in-projection (TP_VARIANTS "p"; default "s p", "": neither);
#  kernels    `graphserve bench kernels --tensor-parallel-size N` at bs $KERNEL_BS (1,32): rank 0's
#             kernels per step (KERNEL_TPS="1 2": TP=1 too);
#  hosts      the multi-host path: two single-GPU "hosts" (CUDA_VISIBLE_DEVICES 0 and 1, a
#             `graphserve worker --node-rank 1` process, --master-addr 127.0.0.1) vs TP=2 on one
#             host (llama3.2-1b);
#  nccl       TP=N with --disable-custom-all-reduce (NCCL only): FULL_AND_PIECEWISE ms/step;
#  sweep      SWEEP="4,8,16,64": FULL_AND_PIECEWISE ms/step at more batch sizes, TP=1 and TP=N.
# Needs the pack of tools/gpu/pack.sh in $PACK (default .gpu). TPS="2" (or "2 4") picks the sizes.
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
tps=${TPS:-2}
preset=${PRESET:-llama3.1-8b}
steps=" ${STEPS:-test allreduce greedy graphs hosts nccl} "
want() { [[ $steps == *" $1 "* ]]; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
if want test; then
  echo "== GPU TP tests"
  timeout 200 "$pack/bin/gs_test_cuda" --gtest_filter='CudaTp.*' >"$out/test_tp.log" 2>&1
  echo "gs_test_cuda CudaTp.*: exit $?"; grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error" "$out/test_tp.log" | head -n 12
fi
if want allreduce; then
  nvidia-smi topo -m 2>/dev/null | head -n 6
  for tp in $tps; do
    echo "== all-reduce latency, $tp GPUs"
    timeout 90 "$gs" bench all-reduce --tensor-parallel-size "$tp" --output-json "$out/allreduce_tp$tp.json" \
      2>"$out/allreduce_tp$tp.log" || { echo "bench all-reduce failed"; tail -n 5 "$out/allreduce_tp$tp.log"; }
  done
fi
common="--load-format dummy --max-num-seqs 128 --max-model-len 512 -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128]"

if want graphs; then
  echo "== decode ms/step, $preset (TP=Ns: GRAPHSERVE_TP_SPIN_MS=${SPIN_MS:-0}, driver and workers sleep in" \
    "poll() at once)"
  for tp in 1 $tps $(for v in ${TP_VARIANTS-s p}; do echo "${tps// /$v }$v"; done); do
    n=${tp%[sp]} modes=NONE,FULL_AND_PIECEWISE spin=${GRAPHSERVE_TP_SPIN_MS:-} extra=
    [[ $tp == *s ]] && spin=${SPIN_MS:-0} modes=FULL_AND_PIECEWISE
    [[ $tp == *p ]] && extra=--all-reduce-in-projection
    # shellcheck disable=SC2086
    GRAPHSERVE_TP_SPIN_MS=$spin timeout 170 "$gs" bench graphs --preset "$preset" $common $extra \
      --tensor-parallel-size "$n" --modes $modes --batch-sizes 1,32,128 --input-len 32 --output-len 16 --num-iters 1 \
      --output-json "$out/graphs_tp$tp.json" --output-png '' >"$out/graphs_tp$tp.txt" 2>"$out/graphs_tp$tp.log" ||
      { echo "bench tp $tp failed"; tail -n 5 "$out/graphs_tp$tp.log"; }
    echo "-- TP=$tp"; grep -E "^(mode|NONE|FULL)" "$out/graphs_tp$tp.txt"
  done
fi
if want kernels; then
  for tp in ${KERNEL_TPS:-$tps}; do
    echo "== bench kernels, TP=$tp rank 0, bs ${KERNEL_BS:-1,32}, $preset"
    # shellcheck disable=SC2086
    timeout 120 "$gs" bench kernels --preset "$preset" $common --tensor-parallel-size "$tp" --batch-sizes "${KERNEL_BS:-1,32}" \
      --input-len 32 --output-len 17 --top 16 >"$out/kernels_tp$tp.txt" 2>"$out/kernels_tp$tp.log" ||
      { echo "bench kernels failed"; tail -n 5 "$out/kernels_tp$tp.log"; }
    cat "$out/kernels_tp$tp.txt"
  done
fi

want greedy && echo "== greedy 128 tokens, $preset, TP=1 vs TP=N"
for tp in 1 $tps; do
  want greedy || break
  # shellcheck disable=SC2086
  timeout 150 "$gs" generate --preset "$preset" $common ${GREEDY_FLAGS:-} --tensor-parallel-size "$tp" --temperature 0 --ignore-eos \
    --max-tokens 128 --logprobs 5 -p "The tensor-parallel model" -p "Once upon a time" \
    --output-json "$out/gen_tp$tp.json" >/dev/null 2>"$out/gen_tp$tp.log" || { echo "generate tp $tp failed"; tail -n 5 "$out/gen_tp$tp.log"; }
  grep -E "all-reduce:|decode:" "$out/gen_tp$tp.log" | sed 's/^\[[^]]*\] //' | head -n 6
done
want greedy && for tp in $tps; do python3 "$(dirname "$0")/tp_compare.py" "$out/gen_tp1.json" "$out/gen_tp$tp.json" "TP=$tp"; done

want hosts && echo "== two single-GPU hosts vs one host, TP=2, llama3.2-1b"
if want hosts; then
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
fi

want nccl && echo "== TP=N, NCCL only (--disable-custom-all-reduce), $preset"
for tp in $tps; do
  want nccl || break
  # shellcheck disable=SC2086
  timeout 120 "$gs" bench graphs --preset "$preset" $common --tensor-parallel-size "$tp" --disable-custom-all-reduce \
    --modes FULL_AND_PIECEWISE --batch-sizes 1,32,128 --input-len 32 --output-len 16 --num-iters 1 \
    --output-json '' --output-png '' >"$out/graphs_tp${tp}_nccl.txt" 2>"$out/graphs_tp${tp}_nccl.log" || echo "nccl-only failed"
  echo "-- TP=$tp NCCL only"; cat "$out/graphs_tp${tp}_nccl.txt"
done
grep -h "all-reduce:" "$out"/node0.log "$out"/node1.log 2>/dev/null | sed 's/^\[[^]]*\] //' | head -n 2
if want sweep && [[ -n "${SWEEP:-}" ]]; then
  echo "== FULL_AND_PIECEWISE ms/step at batch sizes $SWEEP"
  for tp in 1 $tps; do
    # shellcheck disable=SC2086
    timeout 120 "$gs" bench graphs --preset "$preset" $common --tensor-parallel-size "$tp" --modes FULL_AND_PIECEWISE \
      --batch-sizes "$SWEEP" --input-len 32 --output-len 16 --num-iters 1 --output-json '' --output-png '' \
      2>"$out/sweep_tp$tp.log" | grep -E "^FULL_AND_PIECEWISE +[0-9]" | sed "s/^/TP=$tp /"
  done
fi
