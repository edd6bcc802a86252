// Implements ops/cuda/cuda_moe_ops.h.
#include "ops/cuda/cuda_moe_ops.h"

#include <fmt/format.h>

#include "ops/cuda/backend_util.h"
#include "ops/cuda/kernels.h"
#include "ops/moe_checks.h"

namespace gs::cuda_backend {

namespace {

bool aligned16(const Tensor& t) { return !t.defined() || reinterpret_cast<uintptr_t>(t.data()) % 16 == 0; }

}  // namespace

void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids, const Tensor& weights,
               cudaStream_t s) {
  const MoeDims d = check_moe_route(logits, bias, r, ids, weights);
  need(logits, DType::F32, "moe_route", "logits");
  need(ids, DType::I32, "moe_route", "ids");
  if (bias.defined()) need(bias, DType::F32, "moe_route", "bias");
  GS_CUDA_CHECK(cuda::moe_route(ptr<float>(logits), bias.defined() ? ptr<float>(bias) : nullptr, r, ptr<int32_t>(ids),
                                ptr<float>(weights), int(d.T), s));
}

void moe_experts(const MoeExpertsArgs& a, DType dtype, const MoeKernelOptions& opts, cudaStream_t s) {
  const MoeDims d = check_moe_experts(a, dtype);
  for (const Tensor* t : {&a.x, &a.gate_up, &a.down, &a.ids, &a.weights, &a.act_scratch, &a.pair_out, &a.index, &a.out})
    GS_CHECK(t->device().is_cuda(), "moe_experts: {} must be on the GPU", t->str());
  GS_CHECK(d.H % 8 == 0 && d.I % 8 == 0, "moe_experts: hidden {} and expert width {} must be multiples of 8", d.H, d.I);
  for (const Tensor* t : {&a.x, &a.gate_up, &a.down, &a.act_scratch, &a.pair_out, &a.out, &a.shared})
    GS_CHECK(aligned16(*t), "moe_experts: {} must be 16-byte aligned", t->str());
  const float* sg = a.shared_gate.defined() ? ptr<float>(a.shared_gate) : nullptr;
  const int sg_stride = a.shared_gate.defined() ? int(a.shared_gate.row_elems()) : 0;
  const cuda::MoeEpilogue epi{a.gate_up_bias.defined() ? ptr<float>(a.gate_up_bias) : nullptr,
                              a.down_bias.defined() ? ptr<float>(a.down_bias) : nullptr, a.swiglu_limit};
  auto run = [&](auto e) {
    using E = decltype(e);
    GS_CUDA_CHECK(cuda::moe_experts<E>(a.act, ptr<E>(a.x), ptr<E>(a.gate_up), ptr<E>(a.down), ptr<int32_t>(a.ids),
                                       ptr<float>(a.weights), a.shared.defined() ? ptr<E>(a.shared) : nullptr, sg,
                                       sg_stride, ptr<E>(a.act_scratch), ptr<float>(a.pair_out), ptr<int32_t>(a.index),
                                       ptr<E>(a.out), int(d.T), int(d.k), int(d.E), int(d.I), int(d.H), opts, s, epi));
  };
  if (dtype == DType::F32)
    run(float{});
  else
    run(cuda::bf16_t{});
}

std::string moe_kernels(const MoeKernelOptions& opts) {
  return fmt::format(
      "moe_route (a warp a token), moe_align (pairs sorted by expert on the device, cut into work items), gate_up+act "
      "and down as grouped GEMMs over the selected experts only (bf16: mma.sync, an item's pairs a weight read; f32: "
      "GEMVs, {} pairs a weight read), moe_reduce (+ shared expert); bf16 up to {} tokens: gate_up and down only, "
      "items of one pair straight from the routing, the reduce in down's last CTAs",
      opts.tokens_per_pass, opts.direct_max_tokens);
}

}  // namespace gs::cuda_backend
