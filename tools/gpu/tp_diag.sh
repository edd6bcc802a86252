#!/usr/bin/env bash
# Where the custom all-reduce's time goes in TP=2 decode steps (issue 9, the bs-1 target), in one
# device call on nvidia-h200-x2: dummy llama3.1-8b decode ms/step at bs 1 (FULL_AND_PIECEWISE,
# `graphserve bench graphs`) for TP=1 and for TP=2 under each variant of VARIANTS (space-separated,
# each "label" or "label:VAR=value[+VAR=value...]"):
#   base       as shipped
#   trace      GS_AR_TRACE: every all-reduce call's timeline on both ranks, summarised by tp_trace.py
#   nopeers    GS_AR_DEBUG=nopeers: the fused kernel without the peer push and barrier (wrong sums)
#   nobarrier  GS_AR_DEBUG=nobarrier: the push without the barrier (wrong sums)
#   barrier    GS_AR_LAMPORT=0: the fused kernel with the barrier instead of the flagless one
# TEST=1 runs the GPU TP tests first; BS="1,32" picks the batch sizes (default 1).
# Pack as tools/gpu/tp_run.sh says (tp_trace.py beside this script); run `bash .gpu-tp/tp_diag.sh`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PACK=$here
# shellcheck source=tools/gpu/env.sh
source "$here/env.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
preset=${PRESET:-llama3.1-8b}
common="--preset $preset --load-format dummy --max-num-seqs 128 --max-model-len 512 -cc.cudagraph_capture_sizes=[1,2,4,8,16,32,64,128]"
bench() {  # label tp env...
  local label=$1 tp=$2
  shift 2
  # shellcheck disable=SC2086
  env "$@" timeout 120 "$gs" bench graphs $common --tensor-parallel-size "$tp" --modes FULL_AND_PIECEWISE \
    --batch-sizes "${BS:-1}" --input-len 32 --output-len "${OUTPUT_LEN:-64}" --num-iters 1 --output-json '' \
    --output-png '' >"$out/diag_$label.txt" 2>"$out/diag_$label.log" || { echo "$label failed"; tail -n 4 "$out/diag_$label.log"; }
  grep -E "^FULL_AND_PIECEWISE +[0-9]" "$out/diag_$label.txt" | sed "s/^/TP=$tp $label /"
}
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem --format=csv,noheader
if [[ -n ${TEST:-} ]]; then
  timeout 200 "$pack/bin/gs_test_cuda" --gtest_filter='CudaTp.*' >"$out/test_tp.log" 2>&1
  echo "gs_test_cuda CudaTp.*: exit $?"; grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|rror" "$out/test_tp.log" | head -n 12
fi
[[ -n ${TP1:-1} ]] && bench tp1 1 GS_AR_NONE=1
for v in ${VARIANTS:-base trace nopeers nobarrier base}; do
  label=${v%%:*} kv=()
  [[ $v == *:* ]] && IFS=+ read -ra kv <<<"${v#*:}"
  case $label in
    trace) kv+=("GS_AR_TRACE=$out/trace") ;;
    nopeers | nobarrier) kv+=("GS_AR_DEBUG=$label" GS_AR_LAMPORT=0) ;;
    barrier*) kv+=("GS_AR_LAMPORT=0") ;;
  esac
  bench "$label" 2 GS_AR_NONE=1 "${kv[@]}"
  [[ $label == trace ]] && python3 "$here/tp_trace.py" "$out/trace" 1
done
grep -h "GS_AR_DEBUG\|rror" "$out"/diag_*.log | sed 's/^\[[^]]*\] //' | sort | uniq -c | head -n 6
