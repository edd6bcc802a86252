// Implements model/tp_layout.h (TpLayout).
#include "model/tp_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace gs {

TpRange expert_range(int num_experts, int rank, int size) {
  const int base = num_experts / size, extra = num_experts % size;
  return {int64_t(rank) * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::string experts_str(const TpRange& e) {
  return e.count == 1 ? fmt::format("expert {}", e.begin)
                      : fmt::format("experts {}-{}", e.begin, e.begin + e.count - 1);
}

TpLayout make_tp_layout(const ModelConfig& cfg, int rank, int size, bool expert_parallel) {
  GS_CHECK(size >= 1 && rank >= 0 && rank < size, "tensor-parallel rank {} outside [0, {})", rank, size);
  const MoeConfig& moe = cfg.moe;
  const bool ep = expert_parallel && size > 1 && moe.enabled();
  GS_CHECK(!ep || moe.num_experts >= size,
           "--enable-expert-parallel over --tensor-parallel-size {} ranks needs at least one routed expert a rank, "
           "but the model has {} (num_local_experts / num_experts / n_routed_experts): lower --tensor-parallel-size, "
           "or drop "
           "--enable-expert-parallel to shard every expert on its width",
           size, moe.num_experts);
  GS_CHECK(!moe.enabled() || ep || moe.expert_intermediate % size == 0,
           "--tensor-parallel-size {} must divide the experts' width {} (moe_intermediate_size); "
           "--enable-expert-parallel places whole experts on the ranks instead",
           size, moe.expert_intermediate);
  GS_CHECK(!moe.enabled() || moe.shared_intermediate % size == 0,
           "--tensor-parallel-size {} must divide the shared expert's width {} (shared_expert_intermediate_size)", size,
           moe.shared_intermediate);
  GS_CHECK(cfg.num_heads % size == 0,
           "--tensor-parallel-size {} must divide the model's {} attention heads (num_attention_heads)", size,
           cfg.num_heads);
  GS_CHECK(cfg.num_kv_heads % size == 0 || size % cfg.num_kv_heads == 0,
           "--tensor-parallel-size {} and the model's {} KV heads: one must divide the other (KV heads are split, or "
           "replicated when fewer than the ranks)",
           size, cfg.num_kv_heads);
  GS_CHECK(cfg.intermediate_size % size == 0, "--tensor-parallel-size {} must divide the model's intermediate_size {}",
           size, cfg.intermediate_size);
  TpLayout t;
  t.rank = rank;
  t.size = size;
  t.local = cfg;
  t.local.num_heads = cfg.num_heads / size;
  t.head_begin = rank * t.local.num_heads;
  if (cfg.num_kv_heads % size == 0) {
    t.local.num_kv_heads = cfg.num_kv_heads / size;
    t.kv_head_begin = rank * t.local.num_kv_heads;
  } else {
    t.local.num_kv_heads = 1;
    t.kv_head_begin = rank / (size / cfg.num_kv_heads);  // the KV head of this rank's query heads
  }
  t.local.intermediate_size = cfg.intermediate_size / size;
  t.inter_begin = rank * t.local.intermediate_size;
  t.expert_parallel = ep;
  if (ep) {
    const TpRange held = expert_range(moe.num_experts, rank, size);
    t.local.moe.routing.first_expert = int(held.begin);
    t.local.moe.routing.local_experts = int(held.count);
  } else {
    t.local.moe.expert_intermediate = moe.expert_intermediate / size;
  }
  t.local.moe.shared_intermediate = moe.shared_intermediate / size;
  t.expert_inter_begin = ep ? 0 : rank * t.local.moe.expert_intermediate;
  t.shared_inter_begin = rank * t.local.moe.shared_intermediate;
  t.vocab_shard = (int64_t(cfg.vocab_size) + size - 1) / size;
  t.vocab_begin = std::min<int64_t>(int64_t(rank) * t.vocab_shard, cfg.vocab_size);
  t.vocab_count = std::min<int64_t>(t.vocab_shard, cfg.vocab_size - t.vocab_begin);
  return t;
}

}  // namespace gs
