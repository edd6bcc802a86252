// Implements ops/moe_checks.h.
#include "ops/moe_checks.h"

#include "core/error.h"

namespace gs {

namespace {

void need(const Tensor& t, DType d, const char* op, const char* name) {
  GS_CHECK(t.defined(), "{}: {} is undefined", op, name);
  GS_CHECK(t.dtype() == d, "{}: {} must be {}, got {}", op, name, dtype_name(d), t.str());
}
void need_shape(const Tensor& t, int64_t rows, int64_t cols, const char* op, const char* name) {
  GS_CHECK(t.ndim() >= 1 && t.dim(0) == rows && t.row_elems() == cols, "{}: {} must be [{}, {}], got {}", op, name,
           rows, cols, t.str());
}

// An FP8 expert weight's f32 scales (their shape is Tensor::with_scales' to check).
void need_fp8_scales(const Tensor& w, const char* name) {
  GS_CHECK(w.scales().defined() && w.scales().dtype() == DType::F32, "moe_experts: {} {} needs f32 scales, got {}",
           name, w.str(), w.scales().defined() ? w.scales().str() : "none");
}

}  // namespace

MoeDims check_moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                        const Tensor& weights) {
  const char* op = "moe_route";
  const int64_t E = r.num_experts, k = r.top_k;
  GS_CHECK(E > 0 && E <= kMaxMoeExperts && k > 0 && k <= kMaxMoeTopK && k <= E,
           "moe_route: {} experts, top {}: supported up to {} experts and top {}", E, k, kMaxMoeExperts, kMaxMoeTopK);
  GS_CHECK(r.n_group >= 1 && r.n_group <= 64 && E % r.n_group == 0 && r.topk_group >= 1 && r.topk_group <= r.n_group &&
               int64_t(r.topk_group) * (E / r.n_group) >= k,
           "moe_route: {} groups (top {}) of {} experts cannot give {} experts", r.n_group, r.topk_group, E, k);
  GS_CHECK(r.first_expert >= 0 && r.local_experts >= 0 && int64_t(r.first_expert) + r.local_experts <= E,
           "moe_route: local experts [{}, {}) outside the {} experts", r.first_expert,
           int64_t(r.first_expert) + r.local_experts, E);
  need(logits, DType::F32, op, "logits");
  const int64_t T = logits.dim(0);
  need_shape(logits, T, E, op, "logits");
  need(ids, DType::I32, op, "ids"), need_shape(ids, T, k, op, "ids");
  need(weights, DType::F32, op, "weights"), need_shape(weights, T, k, op, "weights");
  if (bias.defined()) {
    need(bias, DType::F32, op, "bias");
    GS_CHECK(bias.numel() == E, "moe_route: bias {} must have {} elements", bias.str(), E);
  }
  return {T, k, E, 0, 0};
}

MoeDims check_moe_experts(const MoeExpertsArgs& a, DType dt) {
  const char* op = "moe_experts";
  need(a.x, dt, op, "x");
  if (a.gate_up.defined() && a.gate_up.dtype() == DType::F8E4M3) {
    need(a.down, DType::F8E4M3, op, "down (gate_up is FP8)");
    need_fp8_scales(a.gate_up, "gate_up"), need_fp8_scales(a.down, "down");
  } else {
    need(a.gate_up, dt, op, "gate_up"), need(a.down, dt, op, "down");
  }
  need(a.ids, DType::I32, op, "ids"), need(a.weights, DType::F32, op, "weights");
  const int64_t T = a.x.dim(0), H = a.x.row_elems(), k = a.ids.row_elems(), I = a.down.row_elems();
  GS_CHECK(I > 0 && a.down.dim(0) % H == 0, "moe_experts: down {} must be [E * {}, I]", a.down.str(), H);
  const int64_t E = a.down.dim(0) / H;
  need_shape(a.gate_up, E * 2 * I, H, op, "gate_up");
  need_shape(a.ids, T, k, op, "ids"), need_shape(a.weights, T, k, op, "weights");
  need(a.out, dt, op, "out"), need_shape(a.out, T, H, op, "out");
  need(a.act_scratch, dt, op, "act_scratch"), need_shape(a.act_scratch, T * k, I, op, "act_scratch");
  need(a.pair_out, DType::F32, op, "pair_out"), need_shape(a.pair_out, T * k, H, op, "pair_out");
  need(a.index, DType::I32, op, "index");
  GS_CHECK(a.index.numel() >= moe_index_elems(T, k, E), "moe_experts: index {} needs {} elements", a.index.str(),
           moe_index_elems(T, k, E));
  if (a.shared.defined()) need(a.shared, dt, op, "shared"), need_shape(a.shared, T, H, op, "shared");
  if (a.shared_gate.defined()) {
    GS_CHECK(a.shared.defined(), "moe_experts: shared_gate without shared");
    need(a.shared_gate, DType::F32, op, "shared_gate");
    GS_CHECK(a.shared_gate.dim(0) == T, "moe_experts: shared_gate {} must have {} rows", a.shared_gate.str(), T);
  }
  if (a.gate_up_bias.defined())
    need(a.gate_up_bias, DType::F32, op, "gate_up_bias"), need_shape(a.gate_up_bias, E, 2 * I, op, "gate_up_bias");
  if (a.down_bias.defined())
    need(a.down_bias, DType::F32, op, "down_bias"), need_shape(a.down_bias, E, H, op, "down_bias");
  if (a.workspace.defined()) need(a.workspace, DType::U8, op, "workspace");
  GS_CHECK(a.routed_experts == 0 || (a.routed_experts >= E && a.routed_experts <= kMaxMoeExperts),
           "moe_experts: routed_experts {} must be 0 or in [{} (the experts given), {}]", a.routed_experts, E,
           kMaxMoeExperts);
  GS_CHECK(a.act != GatedActivation::ClampedSwiglu || a.swiglu_limit > 0,
           "moe_experts: the clamped SwiGLU needs swiglu_limit > 0, got {}", a.swiglu_limit);
  return {T, k, E, I, H};
}

}  // namespace gs
