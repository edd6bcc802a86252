#!/usr/bin/env bash
# One tensor-parallel rank's compute on ONE GPU: llama3.1-8b's shard shapes at TP=2 and TP=4 as
# models of their own (hidden 4096, 32 layers; heads 32/N, KV heads 8/N, intermediate 14336/N,
# vocabulary 128256/N), run unsharded with dummy weights. A rank runs exactly these GEMVs,
# attention and lm_head; what it lacks is the communication (all-reduces, the logits gather) and
# the driver <-> worker round trip. So a rank's step here is the floor TP=N reaches with free
# communication, on a machine with one GPU (TP=4 has never been lent here). tp1_mp runs TP=1 in a
# worker process (--distributed-executor-backend mp): the driver <-> worker round trip alone.
#   RANK_TPS   shard counts (default "2 4"); RANK_BS batch sizes (default 1,32,128)
#   RANK_AB    env variants for a bench graphs A/B on the rank shapes ("default" or NAME=VALUE[,..]),
#              at batch sizes RANK_AB_BS (default 1)
#   RANK_KERNELS=0 skips the per-kernel breakdown (bs 1)
#   device run, kind nvidia-h200, carry [".gpu-pack"] or [".gpu"] (tools/gpu/pack.sh), command:
#   bash tools/gpu/tp_rank.sh
set -uo pipefail
# shellcheck source=tools/gpu/env.sh
source "$(dirname "$0")/env.sh"
export GRAPHSERVE_LOG_LEVEL=${GRAPHSERVE_LOG_LEVEL:-warn}

rank_config() {  # rank_config N DIR: llama3.1-8b's rank shapes at TP=N
  local n=$1 dir=$2
  mkdir -p "$dir"
  cat >"$dir/config.json" <<EOF
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
 "intermediate_size": $((14336 / n)), "num_hidden_layers": 32, "num_attention_heads": $((32 / n)),
 "num_key_value_heads": $((8 / n)), "head_dim": 128, "vocab_size": $((128256 / n)), "rms_norm_eps": 1e-05,
 "rope_theta": 500000.0, "max_position_embeddings": 131072, "tie_word_embeddings": false,
 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192},
 "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16"}
EOF
}

graphs() {  # graphs LABEL ARGS...: FULL_AND_PIECEWISE ms/step rows at $bs, prefixed with LABEL
  local label=$1; shift
  timeout 200 "$gs" bench graphs --load-format dummy --batch-sizes "$bs" --input-len 128 \
    --output-len 32 --num-iters 5 --modes FULL_AND_PIECEWISE --output-png '' --output-json '' "$@" \
    2>"$out/graphs_$label.err" | grep -E '^FULL_AND_PIECEWISE +[0-9]' | sed "s|^|$label |"
  tail -n 2 "$out/graphs_$label.err" | grep -i -E 'error|fail' || true
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bs=${RANK_BS:-1,32,128}
echo "== decode ms/step, FULL_AND_PIECEWISE, prompt 128: llama3.1-8b (TP=1) and its rank shapes"
graphs tp1 --preset llama3.1-8b
# The driver <-> worker round trip alone: the same TP=1 model in one worker process.
graphs tp1_mp --preset llama3.1-8b --distributed-executor-backend mp
for n in ${RANK_TPS:-2 4}; do
  rank_config "$n" "$out/rank$n"
  graphs "rank$n" --model "$out/rank$n"
done
if [[ -n "${RANK_AB:-}" ]]; then
  echo "== A/B on the rank shapes (two rounds)"
  bs=${RANK_AB_BS:-1}
  for round in 1 2; do
    for v in $RANK_AB; do
      vars=GS_AB_NONE=1
      [[ $v != default ]] && vars=${v//,/ }
      for n in ${RANK_TPS:-2 4}; do
        # shellcheck disable=SC2086  # $vars is a list of NAME=VALUE words
        (export $vars; graphs "r$round $v rank$n" --model "$out/rank$n")
      done
    done
  done
fi
if [[ ${RANK_KERNELS:-1} != 0 ]]; then
  for m in tp1 ${RANK_TPS:-2 4}; do
    args=(--preset llama3.1-8b)
    [[ $m != tp1 ]] && args=(--model "$out/rank$m") && m=rank$m
    echo "== bench kernels, bs 1, $m"
    timeout 200 "$gs" bench kernels --load-format dummy --input-len 128 --top "${TOP:-12}" --batch-sizes 1 \
      "${args[@]}" 2>"$out/kernels_$m.err" | tail -n +3
  done
fi
