// TpLayout: which slice of each weight one tensor-parallel rank holds (Megatron-style, as vLLM).
//
// Column-parallel (output rows split): q/k/v and gate/up. Row-parallel (input columns split,
// followed by an all-reduce): o_proj and down. Vocab-parallel: the embedding and lm_head rows,
// ceil(V / N) per rank (the last rank's tail is zero padding). Query heads must divide by N;
// KV heads are split when they divide by N, else each is replicated on N / Hkv ranks (N must
// then be a multiple of Hkv). Mixture-of-experts layers shard every expert (and the shared
// expert) on its intermediate dimension like the dense MLP (vLLM's default); the router is
// replicated. With expert parallelism (--enable-expert-parallel) a rank instead holds whole
// routed experts, a contiguous range of them (expert_range: vLLM's linear placement), and routes
// every token over all experts to compute only the pairs of its own (ops/moe.h); the shared
// expert, attention and the dense MLPs stay sharded on their width, and the MoE block's output is
// a partial sum all the same. At N = 1 the layout is the whole model.
#pragma once
#include <cstdint>
#include <string>

#include "model/model_config.h"

namespace gs {

// `count` consecutive rows (or columns) of a weight from `begin`.
struct TpRange {
  int64_t begin = 0, count = 0;
};

// The routed experts rank `rank` of `size` holds under expert parallelism: num_experts / size
// consecutive ones, one more on each of the first num_experts % size ranks (vLLM's linear
// placement).
TpRange expert_range(int num_experts, int rank, int size);
// "experts 0-63", or "expert 7" (the start-up log).
std::string experts_str(const TpRange& experts);

struct TpLayout {
  int rank = 0, size = 1;
  bool expert_parallel = false;  // whole routed experts per rank (local.moe.routing's expert range)
  // The rank's shapes: num_heads, num_kv_heads, intermediate_size of its shard; moe.routing holds
  // its expert range under expert parallelism (num_experts stays the router's, all of them).
  ModelConfig local;
  int head_begin = 0;          // first query head of this rank
  int kv_head_begin = 0;       // first KV head of this rank
  int inter_begin = 0;         // first MLP channel of this rank
  int expert_inter_begin = 0;  // first channel of every routed expert's MLP on this rank (MoE; 0 with EP)
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
  // The routed experts this rank holds (all of them without expert parallelism).
  TpRange experts() const { return {local.moe.routing.first_expert, local.moe.routing.held_experts()}; }
};

// Throws gs::Error naming the field that does not divide (and the sizes that would work).
// `expert_parallel` applies to models with routed experts at size > 1 (elsewhere it changes nothing).
TpLayout make_tp_layout(const ModelConfig& cfg, int rank, int size, bool expert_parallel = false);

}  // namespace gs
