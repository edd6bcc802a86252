#!/usr/bin/env bash
# The merged tree's GPU check in one device call, from the repository copy with the pack in $PACK
# (default .gpu; tools/gpu/pack.sh, binaries may be xz-compressed as bin/NAME.xz). FC_PHASES picks
# the parts (default "tests base moe prefix"):
#   tests       every GPU test (gs_test_cuda, cut at FC_TEST_S seconds, default 240), or those of
#               the gtest filter FC_TEST_FILTER
#   base        decode ms/step of the previous build (bin/gs_base, if packed) against this one:
#               bench graphs FULL_AND_PIECEWISE, prompt 128, llama3.2-1b bs 1/32/128 and
#               llama3.1-8b bs 1/128, greedy; this build sampled too
#   moe         dummy qwen3-30b-a3b decode ms/step at bs 1/32/128 against the previous build, NONE
#               and sampled too, mixtral-8x7b, the weight-bytes floors (moe_floors.sh) and the
#               kernels of a qwen3-30b-a3b step at bs 1 (tools/gpu/moe_check.sh: the MoE tests too)
#   families    dummy gpt-oss-20b and deepseek-v2-lite decode at bs 1/32 with their start-up lines
#               (attention backend, resolved graph mode, MoE kernels)
#   prefix      tools/gpu/prefix_bench.sh's phases in FC_PREFIX (default "ttft chunk")
#   structured  tools/gpu/structured_bench.sh (needs the llama3 tokenizer in the pack's shared/)
#   embed       tools/gpu/embed_bench.sh (with the HF peer)
#   fp8         dummy llama3.1-8b / llama3.2-1b decode, bf16 against --quantization fp8
#   FC_SOURCE_DIR  the checkout the tests were built in, linked to the repository copy if missing
#   device run, kind nvidia-h200, carry [".gpu"], command: bash tools/gpu/final_check.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
cd "$root" || exit
link_source_dir "${FC_SOURCE_DIR:-}"  # the checkout the tests were built in (their data paths)
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn} GS_FAMILY_FIXTURES=$root/tests/data/families PYTHONUNBUFFERED=1
for z in "$pack"/bin/*.xz; do [[ -f $z ]] && xz -d -f "$z" && chmod +x "${z%.xz}"; done
phases=${FC_PHASES:-tests base moe prefix}
has() { [[ " $phases " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0

# graphs BINARY PRESET BATCH_SIZES MODES [args...]: one summary line per mode and batch size.
graphs() {
  local bin=$1 preset=$2 bs=$3 modes=$4
  shift 4
  timeout 240 "$pack/bin/$bin" bench graphs --load-format dummy --preset "$preset" --batch-sizes "$bs" \
    --input-len 128 --output-len 32 --num-iters 5 --modes "$modes" --output-png '' --output-json '' "$@" 2>&1 |
    grep -E '^(NONE|FULL_AND_PIECEWISE) +[0-9]|rror' | awk -v t="$bin $preset" '{print t, $1, $2, $3}'
}

if has tests; then
  timeout "${FC_TEST_S:-240}" "$pack/bin/gs_test_cuda" --gtest_color=no --gtest_filter="${FC_TEST_FILTER:-*}" \
    >"$out/tests.log" 2>&1
  echo "== gs_test_cuda: exit $? (124: cut at ${FC_TEST_S:-240} s; ${SECONDS} s)"
  grep -E '^\[  (FAILED|PASSED) |^\[==========\]' "$out/tests.log" | tail -n 25
fi
if has base; then
  echo "== decode ms/step, previous build (gs_base) against this one (graphserve) (${SECONDS} s)"
  for shape in llama3.2-1b:1,32,128 llama3.1-8b:1,128; do
    for b in gs_base graphserve; do
      [[ -x $pack/bin/$b ]] && graphs "$b" "${shape%%:*}" "${shape#*:}" FULL_AND_PIECEWISE
    done
  done
  echo "-- sampled (temperature 1, top-p 0.95, top-k 50)"
  graphs graphserve llama3.2-1b 1,32,128 FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50
fi
if has moe; then
  echo "== MoE decode, previous build (gs_base) against this one (${SECONDS} s)"
  bash "$root/tools/gpu/moe_floors.sh" "$gs" qwen3-30b-a3b mixtral-8x7b
  for b in gs_base graphserve; do
    [[ -x $pack/bin/$b ]] && graphs "$b" qwen3-30b-a3b 1,32,128 FULL_AND_PIECEWISE
  done
  graphs graphserve qwen3-30b-a3b 1,32,128 NONE
  graphs graphserve qwen3-30b-a3b 1,32,128 FULL_AND_PIECEWISE --temperature 1.0 --top-p 0.95 --top-k 50 |
    sed 's/$/ sampled/'
  graphs graphserve mixtral-8x7b 1,32,128 FULL_AND_PIECEWISE
  timeout 90 "$gs" bench kernels --load-format dummy --preset qwen3-30b-a3b --batch-sizes 1 --input-len 128 \
    --output-len 6 --top 10 2>&1 | grep -E '^(batch|  )' | head -n 12
fi
if has families; then
  echo "== deepseek-v2-lite (MLA) and gpt-oss-20b decode, with their start-up lines (${SECONDS} s)"
  for p in deepseek-v2-lite gpt-oss-20b; do
    "$gs" info --preset "$p" 2>/dev/null | grep -E '^(parameters|active|multi-head|  kv cache per)'
    GRAPHSERVE_LOG_LEVEL=info timeout 200 "$gs" bench graphs --load-format dummy --preset "$p" --batch-sizes 1,32 \
      --input-len 128 --output-len 32 --num-iters 3 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' 2>&1 |
      grep -E '^(NONE|FULL_AND_PIECEWISE) +[0-9]|rror|attention backend|cudagraph mode|MoE:|dequantiz' |
      sed "s/^/$p: /" | cut -c1-300
  done
fi
if has prefix; then
  echo "== prefix caching (${SECONDS} s)"
  cp "$root/tools/gpu/prefix_bench.sh" "$pack/"
  GS_PHASES=${FC_PREFIX:-ttft chunk} bash "$pack/prefix_bench.sh" | grep -v '^NVIDIA'
fi
if has structured; then
  echo "== structured output (${SECONDS} s)"
  bash "$root/tools/gpu/structured_bench.sh" "$pack"
fi
if has embed; then
  echo "== embeddings (${SECONDS} s)"
  cp "$root/tools/gpu/embed_bench.sh" "$root/tools/gpu/hf_embed.py" "$pack/"
  bash "$pack/embed_bench.sh" | grep -v '^NVIDIA'
fi
if has fp8; then
  echo "== FP8 (${SECONDS} s)"
  for p in llama3.1-8b:1,32,128 llama3.2-1b:1,32,128; do
    graphs graphserve "${p%%:*}" "${p#*:}" FULL_AND_PIECEWISE | sed 's/$/ bf16/'
    graphs graphserve "${p%%:*}" "${p#*:}" FULL_AND_PIECEWISE --quantization fp8 | sed 's/$/ fp8/'
  done
fi
echo "== done in ${SECONDS} s"
