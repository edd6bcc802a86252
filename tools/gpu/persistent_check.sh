#!/usr/bin/env bash
# The persistent decode kernel (issue 33) in one device call, from the pack in $PACK (default
# .gpu; binaries may be xz-compressed): its GPU test against the layered forward, then decode
# ms/step with it (--persistent-decode-max-tokens 4) and without it (the default, 0), greedy and
# sampled, the bytes floor of each shape, the kernels of a bs-1 step, and the HF compile peer.
#   PC_PHASES  parts to run (default "tests bench kernels peer")
#   PC_SHAPES  preset:batch,sizes ... for the bench part
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/persistent_check.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
link_source_dir "${FC_SOURCE_DIR:-}"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} PYTHONUNBUFFERED=1
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
phases=${PC_PHASES:-tests bench kernels peer}
has() { [[ " $phases " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
SECONDS=0

# graphs PRESET BATCH_SIZES [args...]: one line per batch size.
graphs() {
  local preset=$1 bs=$2
  shift 2
  timeout 240 "$gs" bench graphs --load-format dummy --preset "$preset" --batch-sizes "$bs" --input-len 128 \
    --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^FULL_AND_PIECEWISE +[0-9]|rror|decode steps' | awk -v t="$preset" '/decode steps/{sub(/.*decode steps/, "decode steps"); print t": "$0; next} {print t, $2, $3}'
}

if has tests; then
  timeout "${PC_TEST_S:-240}" "$pack/bin/gs_test_cuda" --gtest_color=no \
    --gtest_filter="${PC_TEST_FILTER:-*PersistentDecode*:CudaModel.*:CudaGraph*}" >"$out/tests.log" 2>&1
  echo "== gs_test_cuda: exit $? (${SECONDS} s)"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]|persistent-decode|Failure|rel-L2|Expected|Which' "$out/tests.log" |
    head -n 40
fi
if has bench; then
  echo "== decode ms/step: persistent (--persistent-decode-max-tokens 4) / layered (default) (${SECONDS} s)"
  for shape in ${PC_SHAPES:-llama3.2-1b:1,2,4,8,32 qwen3-0.6b:1,4 smollm2-135m:1,4 llama3.1-8b:1,4}; do
    p=${shape%%:*} bs=${shape#*:}
    GRAPHSERVE_LOG_LEVEL=info graphs "$p" "$bs" --persistent-decode-max-tokens 4 | sed 's/$/ persistent/'
    graphs "$p" "$bs" | sed 's/$/ layered/'
    "$gs" info --preset "$p" 2>/dev/null | grep -E '^parameters' | sed "s/^/$p: /"
  done
  echo "-- sampled (temperature 1, top-p 0.95, top-k 50)"
  graphs llama3.2-1b 1,4 --persistent-decode-max-tokens 4 --temperature 1.0 --top-p 0.95 --top-k 50 |
    sed 's/$/ persistent sampled/'
  graphs llama3.2-1b 1,4 --temperature 1.0 --top-p 0.95 --top-k 50 | sed 's/$/ layered sampled/'
fi
if has kernels; then
  for p in ${PC_KERNELS:-llama3.2-1b}; do
    echo "== bench kernels, $p bs 1, and the persistent kernel's phases (${SECONDS} s)"
    GRAPHSERVE_LOG_LEVEL=info timeout 120 "$gs" bench kernels --load-format dummy --preset "$p" --batch-sizes 1 \
      --persistent-decode-max-tokens 4 --input-len 128 --output-len 6 --top 6 2>&1 | grep -E '^(batch|  )|persistent decode kernel, ' | head -n 8 |
      sed 's/.*persistent decode kernel, /phases: /'
  done
fi
if has peer; then
  echo "== HF peer, torch.compile (${SECONDS} s)"
  (cd "$out" && timeout 240 python3 "$pack/shared/tools/hf_peer.py" "${PC_PEER:-llama3.2-1b}" compile 1) 2>&1 |
    grep -E 'ms_per_step|rror' | tail -n 4
fi
echo "== done in ${SECONDS} s"
