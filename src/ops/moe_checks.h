// The shape and dtype checks of the mixture-of-experts ops (Backend::moe_route, moe_experts),
// made by every backend when an op is enqueued; errors name the op and the operand.
#pragma once
#include "ops/backend.h"

namespace gs {

struct MoeDims {
  int64_t T, k, E, I, H;  // tokens, experts a token, experts, expert width, hidden size
};
MoeDims check_moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                        const Tensor& weights);
// `dt` is the backend's compute dtype (x, gate_up, down, shared, act_scratch, out).
MoeDims check_moe_experts(const MoeExpertsArgs& a, DType dt);

}  // namespace gs
