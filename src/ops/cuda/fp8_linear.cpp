// Implements ops/cuda/fp8_linear.h.
#include "ops/cuda/fp8_linear.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/logging.h"
#include "ops/cuda/fp8_kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/skinny_gemm.h"

namespace gs {

namespace {
// Grows `t` (1-D, `dtype`) to at least n elements; load time only.
void reserve(Tensor& t, int64_t n, DType dtype, Allocator& alloc) {
  if (!t.defined() || t.numel() < n) t = Tensor::empty({n}, dtype, alloc);
}
}  // namespace

void Fp8Linear::quantize(const Tensor& src, int64_t group_rows, bool block128, const Tensor& dst, cudaStream_t s) {
  GS_CHECK(src.dtype() == DType::F32 && src.ndim() == 2 && dst.shape() == src.shape() && dst.scales().defined(),
           "quantize_fp8: src {} must be f32 [r, K] and dst {} e4m3 of its shape with scales", src.str(), dst.str());
  const int64_t r = src.dim(0), K = src.dim(1), G = dst.scales().dim(1);
  GS_CHECK(G == (block128 ? (K + 127) / 128 : 1), "quantize_fp8: dst scales {} do not match {} groups of {}",
           dst.scales().str(), block128 ? "128-column" : "whole-row", src.str());
  Tensor amax = Tensor::empty({(r + group_rows - 1) / group_rows * G}, DType::F32, alloc_);
  GS_CUDA_CHECK(cuda::fp8_quantize(src.data_as<float>(), int(r), int(K), int(group_rows), block128,
                                   amax.data_as<float>(), dst.data_as<uint8_t>(), dst.scales().data_as<float>(), s));
  GS_CUDA_CHECK(cudaStreamSynchronize(s));  // amax is freed on return
  // The dequantization scratch holds a whole weight: the parts of a fused weight (q|k|v, gate|up)
  // are quantized one after the other into contiguous rows, so a part that starts where the last
  // one ended extends the same weight.
  const auto* begin = dst.data_as<const uint8_t>();
  if (begin != part_end_) weight_begin_ = begin;
  part_end_ = begin + r * K;
  reserve(dequant_, (part_end_ - weight_begin_), DType::BF16, alloc_);
  if (opts_.lt_fp8_gemm) {
    if (!lt_) lt_ = std::make_unique<Fp8LtGemm>(alloc_);
    reserve(xq_, int64_t(opts_.lt_max_rows) * K, DType::U8, alloc_);
    reserve(xs_, opts_.lt_max_rows, DType::F32, alloc_);
  }
}

bool Fp8Linear::run_lt(const Tensor& x, const Tensor& w, const uint16_t* bias, const Tensor& y, int M, int N, int K,
                       cudaStream_t s) {
  if (!lt_ || w.scales().dim(1) != 1 || y.dtype() != DType::BF16 || xq_.numel() < int64_t(opts_.lt_max_rows) * K)
    return false;
  const int chunk = opts_.lt_max_rows;
  if (!lt_->supported(std::min(M, chunk), N, K) || (M > chunk && M % chunk && !lt_->supported(M % chunk, N, K))) {
    if (!warned_)
      spdlog::warn("cuBLASLt has no FP8 e4m3 GEMM for M {} N {} K {}: such shapes dequantize the weight to bf16", M, N,
                   K);
    warned_ = true;
    return false;
  }
  for (int m0 = 0; m0 < M; m0 += chunk) {
    const int m = std::min(chunk, M - m0);
    const auto* xr = x.data_as<uint16_t>() + int64_t(m0) * K;
    GS_CUDA_CHECK(cuda::fp8_quantize_rows(xr, m, K, xq_.data_as<uint8_t>(), xs_.data_as<float>(), s));
    lt_->matmul(xq_.data_as<uint8_t>(), xs_.data_as<float>(), w.data_as<uint8_t>(), w.scales().data_as<float>(), bias,
                y.data_as<uint16_t>() + int64_t(m0) * N, m, N, K, s);
  }
  return true;
}

void Fp8Linear::linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, cudaStream_t s,
                       const std::function<void(const Tensor& wb)>& dense) {
  GS_CHECK(x.dtype() == DType::BF16 && w.scales().defined(), "linear: FP8 weight {} needs bf16 x (got {})", w.str(),
           x.str());
  const int M = int(x.dim(0)), N = int(w.dim(0)), K = int(w.dim(1)), G = int(w.scales().dim(1));
  GS_CHECK(x.row_elems() == K, "linear: w {} must be [N, {}] for x {}", w.str(), x.row_elems(), x.str());
  if (M == 0 || N == 0) return;
  const auto* b = bias.defined() ? bias.data_as<uint16_t>() : nullptr;
  if (fuses(x, w)) {
    GS_CUDA_CHECK(cuda::fp8_skinny_gemm(x.data_as<cuda::bf16_t>(), w.data_as<uint8_t>(), w.scales().data_as<float>(), b,
                                        y.data(), y.dtype() == DType::F32, M, N, K, s));
    return;
  }
  if (M <= std::min(opts_.gemv_max_tokens, cuda::kFp8GemvMaxM) && cuda::fp8_gemv_supported(M, K, x.data(), w.data())) {
    GS_CUDA_CHECK(cuda::fp8_gemv(x.data_as<uint16_t>(), w.data_as<uint8_t>(), w.scales().data_as<float>(), G, b,
                                 y.data(), y.dtype() == DType::F32, M, N, K, s));
    return;
  }
  if (opts_.lt_fp8_gemm && run_lt(x, w, b, y, M, N, K, s)) return;
  GS_CHECK(dequant_.numel() >= int64_t(N) * K, "linear: FP8 weight {} is larger than the dequantization scratch",
           w.str());
  const Tensor wb = dequant_.prefix({N, K});
  GS_CUDA_CHECK(
      cuda::fp8_dequantize(w.data_as<uint8_t>(), w.scales().data_as<float>(), G, wb.data_as<uint16_t>(), N, K, s));
  dense(wb);
}

namespace {
// The skinny kernel's token limit for a weight: skinny_max_tokens, and on small weights (at most
// cuda::kSkinnySmallWeights elements) at least cuda::kSkinnySmallTokens, the bf16 path's rule: there
// cuBLASLt's FP8 GEMM is launch-bound and needs the per-token quantization and the scale pass
// besides; 0 while skinny_max_tokens is 0.
int skinny_limit(const Fp8KernelOptions& o, bool small_weight) {
  if (o.skinny_max_tokens <= 0) return 0;
  return std::min(small_weight ? std::max(o.skinny_max_tokens, cuda::kSkinnySmallTokens) : o.skinny_max_tokens,
                  cuda::kSkinnyMaxM);
}
}  // namespace

bool Fp8Linear::fuses(const Tensor& x, const Tensor& w) const {
  const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0;
  return M >= 1 && M <= skinny_limit(opts_, w.dim(0) * w.dim(1) <= cuda::kSkinnySmallWeights) &&
         x.dtype() == DType::BF16 && w.scales().defined() && w.scales().dim(1) == 1 && x.row_elems() == w.dim(1) &&
         cuda::fp8_skinny_supported(int(M), int(w.dim(1)), x.data(), w.data());
}

bool Fp8Linear::fuses_norm(const RmsNormInput& norm, const Tensor& x, const Tensor& w) const {
  const Tensor& r = norm.residual;
  const int64_t M = x.dim(0), K = w.dim(1);
  return r.defined() && r.dtype() == DType::F32 && r.device().is_cuda() && r.ndim() == 2 && r.dim(0) == M &&
         r.dim(1) == K && norm.weight.dtype() == DType::BF16 && norm.weight.device().is_cuda() &&
         norm.weight.numel() == K &&
         cuda::fp8_skinny_norm_supported(int(M), int(K), r.data_as<float>(), norm.weight.data_as<cuda::bf16_t>(),
                                         w.data());
}

namespace {
// The kernels' input: x, or the norm of the residual computed in the kernel.
cuda::GemvInput<cuda::bf16_t> input(const Tensor& x, const RmsNormInput* norm) {
  if (!norm) return {x.data_as<cuda::bf16_t>()};
  return {norm->residual.data_as<float>(), norm->weight.data_as<cuda::bf16_t>(), norm->eps};
}
}  // namespace

void Fp8Linear::linear_gated(GatedActivation act, const Tensor& x, const RmsNormInput* norm, const Tensor& w,
                             const Tensor& out, cudaStream_t s) {
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_gated(act, input(x, norm), w.data_as<uint8_t>(), w.scales().data_as<float>(),
                                            out.data_as<cuda::bf16_t>(), int(x.dim(0)), int(out.row_elems()),
                                            int(w.dim(1)), s));
}

void Fp8Linear::linear_add_residual(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& residual,
                                    cudaStream_t s) {
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_add_residual(input(x, norm), w.data_as<uint8_t>(), w.scales().data_as<float>(),
                                                   residual.data_as<float>(), int(x.dim(0)), int(w.dim(0)),
                                                   int(w.dim(1)), s));
}

void Fp8Linear::linear_qkv_rope(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& bias,
                                const Tensor& positions, const Tensor& inv_freq, int head_dim, int long_from,
                                const Tensor& q, const Tensor& k, const Tensor& v, cudaStream_t s) {
  const int D = head_dim;
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_qkv_rope(
      input(x, norm), w.data_as<uint8_t>(), w.scales().data_as<float>(),
      bias.defined() ? bias.data_as<cuda::bf16_t>() : nullptr, positions.data_as<int32_t>(), inv_freq.data_as<float>(),
      q.data_as<cuda::bf16_t>(), k.data_as<cuda::bf16_t>(), v.data_as<cuda::bf16_t>(), int(x.dim(0)),
      int(q.row_elems() / D), int(k.row_elems() / D), D, int(w.dim(1)), long_from, s));
}

std::string Fp8Linear::describe() const {
  return fmt::format(
      "whole-row scales up to {} tokens (weights of at most 2^23 elements: {}): the skinny tensor-core kernel on "
      "weights widened to bf16 in registers, with the RoPE split, gated activation and both halves of the deferred "
      "norm fused; 128x128 blocks: the FP8 GEMV up "
      "to {} tokens; above: {}",
      skinny_limit(opts_, false), skinny_limit(opts_, true), std::min(opts_.gemv_max_tokens, cuda::kFp8GemvMaxM),
      opts_.lt_fp8_gemm ? "cuBLASLt FP8 e4m3 GEMM on x quantized per token, unit scales, then per-token x per-channel "
                          "scales and bias in one epilogue kernel (128x128 block-scaled weights: dequantized to bf16 + "
                          "the bf16 GEMM)"
                        : "the weight dequantized to bf16 + the bf16 GEMM");
}

}  // namespace gs
