// TpLayout: which slice of each weight one tensor-parallel rank holds (Megatron-style, as vLLM).
//
// Column-parallel (output rows split): q/k/v and gate/up. Row-parallel (input columns split,
// followed by an all-reduce): o_proj and down. Vocab-parallel: the embedding and lm_head rows,
// ceil(V / N) per rank (the last rank's tail is zero padding). Query heads must divide by N;
// KV heads are split when they divide by N, else each is replicated on N / Hkv ranks (N must
// then be a multiple of Hkv). Mixture-of-experts layers shard every expert (and the shared
// expert) on its intermediate dimension like the dense MLP (vLLM's default); the router is
// replicated. At N = 1 the layout is the whole model.
#pragma once
#include <cstdint>

#include "model/model_config.h"

namespace gs {

// `count` consecutive rows (or columns) of a weight from `begin`.
struct TpRange {
  int64_t begin = 0, count = 0;
};

struct TpLayout {
  int rank = 0, size = 1;
  ModelConfig local;           // the rank's shapes: num_heads, num_kv_heads, intermediate_size of its shard
  int head_begin = 0;          // first query head of this rank
  int kv_head_begin = 0;       // first KV head of this rank
  int inter_begin = 0;         // first MLP channel of this rank
  int expert_inter_begin = 0;  // first channel of every routed expert's MLP on this rank (MoE)
  int shared_inter_begin = 0;  // first channel of the shared expert's MLP on this rank (MoE)
  int64_t vocab_shard = 0;     // embedding / lm_head rows per rank (ceil(V / N))
  int64_t vocab_begin = 0;     // first vocabulary row of this rank
  int64_t vocab_count = 0;     // real rows of this rank (vocab_shard, or fewer on the last rank)

  bool sharded() const { return size > 1; }
  // The rows of q_proj (the rank's query heads) a column-parallel rank holds; the same range of
  // o_proj's input columns is its row-parallel shard.
  TpRange q_rows() const { return {int64_t(head_begin) * local.head_dim, local.q_size()}; }
  // The rows of k_proj and of v_proj (its KV heads, split or replicated).
  TpRange kv_rows() const { return {int64_t(kv_head_begin) * local.head_dim, local.kv_size()}; }
  // The rows of gate_proj and of up_proj (its MLP channels); the same range of down_proj's columns.
  TpRange inter_rows() const { return {inter_begin, local.intermediate_size}; }
};

// Throws gs::Error naming the field that does not divide (and the sizes that would work).
TpLayout make_tp_layout(const ModelConfig& cfg, int rank, int size);

}  // namespace gs
