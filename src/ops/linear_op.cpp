// Backend's unfused LinearOp (ops/linear_op.h, ops/backend.h): the norm, the GEMM, the epilogue.
#include "core/error.h"
#include "ops/backend.h"

namespace gs {

void Backend::linear(const LinearOp& op) {
  if (op.norm) rms_norm(op.norm->residual, op.norm->weight, op.norm->eps, op.x);
  linear(op.x, op.w, op.bias, op.y);
  apply_epilogue(op.y, op.then);
}

void Backend::apply_epilogue(const Tensor& y, const LinearEpilogue& then) {
  if (const auto* e = std::get_if<SplitQkvRope>(&then)) {
    GS_CHECK(e->rope, "split_qkv_rope epilogue without a RopeConfig");
    split_qkv_rope(y, e->positions, *e->rope, e->q_norm, e->k_norm, e->eps, e->q, e->k, e->v);
  } else if (const auto* g = std::get_if<Gated>(&then)) {
    gated_activation(g->act, y, g->out);
  } else if (const auto* a = std::get_if<AddRmsNorm>(&then)) {
    GS_CHECK(!a->peer_sum, "this backend does not sum the ranks' partials inside a projection (folds_peer_sum)");
    add_rms_norm(a->residual, y, a->weight, a->eps, a->out);
  }
}

}  // namespace gs
