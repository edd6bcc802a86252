// Implements ops/cuda/cuda_moe_ops.h.
#include "ops/cuda/cuda_moe_ops.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/cuda/backend_util.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/lt_gemm.h"
#include "ops/moe_checks.h"

namespace gs::cuda_backend {

namespace {

bool aligned16(const Tensor& t) { return !t.defined() || reinterpret_cast<uintptr_t>(t.data()) % 16 == 0; }

// The dense form (MoeKernelOptions::dense_max_tokens) and its workspace for T tokens: gu [T, E 2I]
// bf16, then down_out [E, T, H] f32 at a 256-byte boundary. Whether it pays depends on an expert's
// pairs (T k / routed on average) and the work against the selected pairs' (routed / k), so under
// expert parallelism it is the whole layer's choice: `routed` is every rank's experts.
bool dense_form(const MoeKernelOptions& o, int64_t T, int64_t k, int64_t routed) {
  return T > 0 && T <= o.dense_max_tokens && T * k >= int64_t(o.dense_min_pairs_per_expert) * routed &&
         routed <= int64_t(o.dense_max_work_ratio) * k;
}
int64_t dense_gu_bytes(int64_t T, int64_t E, int64_t I) { return (T * E * 2 * I * 2 + 255) / 256 * 256; }
int64_t dense_bytes(int64_t T, int64_t E, int64_t I, int64_t H) { return dense_gu_bytes(T, E, I) + E * T * H * 4; }

// Every expert on every token: gate_up as one GEMM over all experts' rows, the selected pairs'
// activations, down as E GEMMs in one batched call (expert e reads its activations as columns of
// gu: rows E 2I apart), then the weighted sum of each token's selected rows.
void run_dense(const MoeExpertsArgs& a, const MoeDims& d, const cuda::MoeEpilogue& epi, const float* shared_gate,
               int shared_gate_stride, LtGemm& gemm, cudaStream_t s) {
  const int T = int(d.T), k = int(d.k), E = int(d.E), I = int(d.I), H = int(d.H);
  auto* gu = static_cast<uint16_t*>(a.workspace.data());
  auto* down_out = reinterpret_cast<float*>(static_cast<uint8_t*>(a.workspace.data()) + dense_gu_bytes(T, E, I));
  gemm.matmul(a.x.data(), a.gate_up.data(), gu, false, false, T, E * 2 * I, H, s);
  GS_CUDA_CHECK(cuda::moe_dense_act(a.act, gu, ptr<int32_t>(a.ids), T, k, E, I, epi, s));
  const LtGemm::Batch experts{.count = E,
                              .ldx = int64_t(E) * 2 * I,
                              .x_stride = 2 * int64_t(I),
                              .w_stride = int64_t(H) * I,
                              .y_stride = int64_t(T) * H};
  gemm.matmul_batched(gu, a.down.data(), down_out, false, true, T, H, I, experts, s);
  GS_CUDA_CHECK(cuda::moe_dense_reduce(down_out, ptr<int32_t>(a.ids), ptr<float>(a.weights), epi.down_bias,
                                       a.shared.defined() ? ptr<uint16_t>(a.shared) : nullptr, shared_gate,
                                       shared_gate_stride, T, k, E, H, ptr<uint16_t>(a.out), s));
}

}  // namespace

int64_t moe_workspace_bytes(const MoeKernelOptions& opts, DType dtype, int64_t T, int64_t k, int64_t E, int64_t I,
                            int64_t H, int64_t routed) {
  const int64_t top = std::min<int64_t>(T, opts.dense_max_tokens);
  return dtype == DType::BF16 && dense_form(opts, top, k, routed) ? dense_bytes(top, E, I, H) : 0;
}

void moe_route(const Tensor& logits, const Tensor& bias, const MoeRouting& r, const Tensor& ids, const Tensor& weights,
               cudaStream_t s) {
  const MoeDims d = check_moe_route(logits, bias, r, ids, weights);
  need(logits, DType::F32, "moe_route", "logits");
  need(ids, DType::I32, "moe_route", "ids");
  if (bias.defined()) need(bias, DType::F32, "moe_route", "bias");
  GS_CUDA_CHECK(cuda::moe_route(ptr<float>(logits), bias.defined() ? ptr<float>(bias) : nullptr, r, ptr<int32_t>(ids),
                                ptr<float>(weights), int(d.T), s));
}

bool moe_experts(const MoeExpertsArgs& a, DType dtype, const MoeKernelOptions& opts, LtGemm& gemm, cudaStream_t s,
                 bool handoff) {
  const MoeDims d = check_moe_experts(a, dtype);
  for (const Tensor* t : {&a.x, &a.gate_up, &a.down, &a.ids, &a.weights, &a.act_scratch, &a.pair_out, &a.index, &a.out})
    GS_CHECK(t->device().is_cuda(), "moe_experts: {} must be on the GPU", t->str());
  GS_CHECK(d.H % 8 == 0 && d.I % 8 == 0, "moe_experts: hidden {} and expert width {} must be multiples of 8", d.H, d.I);
  for (const Tensor* t : {&a.x, &a.gate_up, &a.down, &a.act_scratch, &a.pair_out, &a.out, &a.shared,
                          &a.gate_up.scales(), &a.down.scales()})
    GS_CHECK(aligned16(*t), "moe_experts: {} must be 16-byte aligned", t->str());
  const float* sg = a.shared_gate.defined() ? ptr<float>(a.shared_gate) : nullptr;
  const int sg_stride = a.shared_gate.defined() ? int(a.shared_gate.row_elems()) : 0;
  const cuda::MoeEpilogue epi{a.gate_up_bias.defined() ? ptr<float>(a.gate_up_bias) : nullptr,
                              a.down_bias.defined() ? ptr<float>(a.down_bias) : nullptr, a.swiglu_limit};
  const bool fp8 = a.gate_up.dtype() == DType::F8E4M3;
  const int64_t routed = a.routed_experts > 0 ? a.routed_experts : d.E;
  GS_CHECK(!fp8 || (dtype == DType::BF16 && d.H % 128 == 0 && d.I % 128 == 0),
           "moe_experts: FP8 experts need bf16 compute and hidden {} and expert width {} multiples of 128", d.H, d.I);
  if (dtype == DType::BF16 && !fp8 && dense_form(opts, d.T, d.k, routed) && a.workspace.defined() &&
      a.workspace.numel() >= dense_bytes(d.T, d.E, d.I, d.H) && aligned16(a.workspace)) {
    run_dense(a, d, epi, sg, sg_stride, gemm, s);
    return false;
  }
  const bool hand = handoff && a.then && dtype == DType::BF16 && d.T == 1 &&
                    cuda::moe_direct_path(opts, int(d.T), int(d.k), int(routed), int(d.H));
  const cuda::MoeNormHandoff nh = hand ? cuda::MoeNormHandoff{ptr<float>(a.then->residual),
                                                              ptr<uint16_t>(a.then->weight), ptr<uint16_t>(a.then->out)}
                                       : cuda::MoeNormHandoff{};
  const auto weight = [](const Tensor& w) {
    return w.dtype() == DType::F8E4M3 ? cuda::MoeWeight{w.data(), ptr<float>(w.scales()), int(w.scales().row_elems())}
                                      : cuda::MoeWeight{w.data()};
  };
  auto run = [&](auto e) {
    using E = decltype(e);
    GS_CUDA_CHECK(cuda::moe_experts<E>(a.act, ptr<E>(a.x), weight(a.gate_up), weight(a.down), ptr<int32_t>(a.ids),
                                       ptr<float>(a.weights), a.shared.defined() ? ptr<E>(a.shared) : nullptr, sg,
                                       sg_stride, ptr<E>(a.act_scratch), ptr<float>(a.pair_out), ptr<int32_t>(a.index),
                                       ptr<E>(a.out), int(d.T), int(d.k), int(d.E), int(routed), int(d.I), int(d.H),
                                       opts, s, epi, nh));
  };
  if (dtype == DType::F32)
    run(float{});
  else
    run(cuda::bf16_t{});
  return hand;
}

std::string moe_kernels(const MoeKernelOptions& opts) {
  return fmt::format(
      "moe_route (a CTA a token, a thread an expert; a warp a token where experts are grouped), moe_align (pairs "
      "sorted by expert on the device, cut into work items), gate_up+act "
      "and down as grouped GEMMs over the selected experts only (bf16: mma.sync, an item's pairs a weight read, items "
      "of 128 pairs (prefill) as wgmma tiles through a cp.async ring, 128x256 for bf16 experts, 128x128 for FP8 ones "
      "with a scale a row; FP8 e4m3 experts widened to bf16 in registers, each 128-k block's products scaled apart; "
      "f32: GEMVs, {} pairs a weight read), moe_reduce (+ shared expert); bf16 up to {} tokens: gate_up and down only, "
      "items of one pair straight from the routing, the reduce in down's last CTAs; bf16 up to {} tokens with {}+ "
      "pairs an expert, where experts <= {} x experts a token: every expert on every token (cuBLASLt GEMMs; bf16 "
      "experts only), the selected pairs' rows summed",
      opts.tokens_per_pass, opts.direct_max_tokens, opts.dense_max_tokens, opts.dense_min_pairs_per_expert,
      opts.dense_max_work_ratio);
}

}  // namespace gs::cuda_backend
