// Implements model/moe_block.h.
#include "model/moe_block.h"

#include <fmt/format.h>

#include "core/logging.h"
#include "model/tp_layout.h"

namespace gs {

MoeBlock::MoeBlock(const ModelConfig& cfg, Backend& backend, int max_tokens)
    : moe_(&cfg.moe), act_(cfg.activation), be_(&backend) {
  const MoeConfig& m = cfg.moe;
  int sparse = 0;
  for (int l = 0; l < cfg.num_layers; ++l) sparse += m.sparse(l) ? 1 : 0;
  const MoeRouting& r = m.routing;
  spdlog::info("MoE: {} of {} layers sparse, {} experts{} of width {}, top {}{}; kernels ({}): {}", sparse,
               cfg.num_layers, m.num_experts,
               r.expert_parallel() ? fmt::format(" ({} here)", experts_str({r.first_expert, r.local_experts})) : "",
               m.expert_intermediate, r.top_k,
               m.shared_intermediate > 0 ? fmt::format(", shared expert of width {}", m.shared_intermediate) : "",
               backend.name(), backend.moe_kernels());
  // The router scores all E experts; moe_experts' index and workspace cover the held ones.
  const int64_t M = max_tokens, H = cfg.hidden_size, E = m.num_experts, El = r.held_experts(), k = r.top_k;
  const int64_t I = m.expert_intermediate, Is = m.shared_intermediate;
  auto alloc = [&](Shape s, DType d) { return Tensor::empty(s, d, backend.allocator()); };
  const DType dt = backend.compute_dtype();
  router_logits_ = alloc({M, E}, DType::F32);
  topk_ids_ = alloc({M, k}, DType::I32);
  topk_weights_ = alloc({M, k}, DType::F32);
  if (Is > 0) {
    shared_gate_up_ = alloc({M, 2 * Is}, dt);
    shared_act_ = alloc({M, Is}, dt);
    shared_out_ = alloc({M, H}, dt);
  }
  if (m.shared_gate) shared_gate_ = alloc({M, 8}, DType::F32);
  out_ = alloc({M, H}, dt);
  pair_act_ = alloc({M * k, I}, dt);
  pair_out_ = alloc({M * k, H}, DType::F32);
  index_ = alloc({moe_index_elems(M, k, El)}, DType::I32);
  if (const int64_t ws = backend.moe_workspace_bytes(M, k, El, I, H, E); ws > 0) workspace_ = alloc({ws}, DType::U8);
}

void MoeBlock::run(const MoeLayerWeights& w, const Tensor& score_bias, const Tensor& hid, int n,
                   const std::optional<RmsNormInput>& norm, const std::optional<AddRmsNorm>& then) {
  const MoeConfig& m = *moe_;
  Backend& be = *be_;
  const int64_t k = m.routing.top_k;
  MoeExpertsArgs a;
  a.act = act_;
  a.swiglu_limit = m.swiglu_limit;
  a.gate_up_bias = w.experts_gate_up_bias;
  a.down_bias = w.experts_down_bias;
  a.x = hid;
  a.gate_up = w.experts_gate_up;
  a.down = w.experts_down;
  a.ids = topk_ids_.rows(0, n);
  a.weights = topk_weights_.rows(0, n);
  std::optional<RmsNormInput> keep = norm;
  if (keep) keep->keep_x = true;  // the experts read hid
  be.linear({.x = hid, .norm = keep, .w = w.router, .bias = w.router_bias, .y = router_logits_.rows(0, n)});
  be.moe_route(router_logits_.rows(0, n), score_bias, m.routing, a.ids, a.weights);
  if (m.shared_intermediate > 0) {
    be.linear({.x = hid,
               .w = w.shared_gate_up,
               .y = shared_gate_up_.rows(0, n),
               .then = Gated{act_, shared_act_.rows(0, n)}});
    a.shared = shared_out_.rows(0, n);
    be.linear(shared_act_.rows(0, n), w.shared_down, Tensor(), a.shared);
  }
  if (m.shared_gate) {
    a.shared_gate = shared_gate_.rows(0, n);
    be.linear(hid, w.shared_gate, Tensor(), a.shared_gate);
  }
  a.act_scratch = pair_act_.rows(0, n * k);
  a.pair_out = pair_out_.rows(0, n * k);
  a.index = index_;
  a.out = out_.rows(0, n);
  a.workspace = workspace_;
  a.routed_experts = m.num_experts;
  a.then = then;
  be.moe_experts(a);
}

}  // namespace gs
