// CPU reference of the mixture-of-experts ops (Backend::moe_route, moe_experts), fp32: shape
// checks when enqueued, then a closure over raw pointers on the CPU stream.
#pragma once
#include "core/cpu_stream.h"
#include "ops/backend.h"

namespace gs::cpu {

void enqueue_moe_route(CpuStream& s, const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids,
                       const Tensor& weights);
void enqueue_moe_experts(CpuStream& s, const MoeExpertsArgs& a);

}  // namespace gs::cpu
