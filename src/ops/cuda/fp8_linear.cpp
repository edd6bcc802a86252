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
// cuBLASLt's block-scaled GEMM takes K in multiples of 4 blocks of 128: it misreads the block grid
// of narrower weights (2 blocks) while its heuristic accepts them.
constexpr int kBlockGemmK = 512;

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
  // Parts of weights freed since may have begun in this part's rows: they are gone.
  block_parts_.erase(block_parts_.lower_bound(begin), block_parts_.lower_bound(part_end_));
  grids_.erase(grids_.lower_bound(weight_begin_), grids_.lower_bound(part_end_));
  if (block128) block_parts_.insert(begin);
  aligned_.clear();
  reserve(dequant_, (part_end_ - weight_begin_), DType::BF16, alloc_);
  if (opts_.lt_fp8_gemm) {
    if (!lt_) lt_ = std::make_unique<Fp8LtGemm>(alloc_, opts_.lt_block_split_k, opts_.lt_fast_accum);
    reserve(xq_, int64_t(opts_.lt_max_rows) * K, DType::U8, alloc_);
    reserve(xs_, int64_t(opts_.lt_max_rows) * G, DType::F32, alloc_);
    if (block128) reserve(grid_, ((part_end_ - weight_begin_) / K + 127) / 128 * G, DType::F32, alloc_);
  }
}

bool Fp8Linear::block_rows_aligned(const Tensor& w) {
  const auto* p = w.data_as<uint8_t>();
  const auto [it, fresh] = aligned_.try_emplace(p, true);
  if (!fresh) return it->second;
  const int64_t K = w.dim(1), end = w.dim(0) * K;
  for (auto part = block_parts_.lower_bound(p); part != block_parts_.end() && *part - p < end; ++part)
    if ((*part - p) / K % 128 != 0) it->second = false;
  return it->second;
}

int Fp8Linear::lt_rows(int m, int N, int K, bool block) {
  if (lt_->supported(m, N, K, block)) return m;
  const int m4 = m - m % 4;
  return block && m4 > 0 && m - m4 <= cuda::kFp8GemvMaxM && lt_->supported(m4, N, K, true) ? m4 : 0;
}

bool Fp8Linear::lt_takes(const Tensor& x, const Tensor& w, const Tensor& y) {
  const int M = int(x.dim(0)), N = int(w.dim(0)), K = int(w.dim(1)), G = int(w.scales().dim(1));
  const int chunk = opts_.lt_max_rows;
  const bool block = G != 1;
  if (!opts_.lt_fp8_gemm || !lt_ || y.dtype() != DType::BF16 || xq_.numel() < int64_t(chunk) * K) return false;
  if (block && (K % kBlockGemmK != 0 || N % 128 != 0 || !block_rows_aligned(w) || xs_.numel() < int64_t(chunk) * G ||
                grid_.numel() < int64_t(N + 127) / 128 * G || !cuda::fp8_gemv_supported(1, K, x.data(), w.data())))
    return false;
  bool ok = true;
  for (const int m : {std::min(M, chunk), M > chunk ? M % chunk : 0})
    ok = ok && (m == 0 || lt_rows(m, N, K, block) > 0);
  if (!ok && !warned_) {
    spdlog::warn("cuBLASLt has no FP8 e4m3 GEMM for M {} N {} K {}{}: such shapes dequantize the weight to bf16", M, N,
                 K, block ? " on 128x128 blocks" : "");
    warned_ = true;
  }
  return ok;
}

void Fp8Linear::linear_unscaled(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, cudaStream_t s,
                                const ScaledRows& then) {
  const int M = int(x.dim(0)), N = int(w.dim(0)), K = int(w.dim(1)), G = int(w.scales().dim(1));
  const int chunk = opts_.lt_max_rows;
  const auto* b = bias.defined() ? bias.data_as<uint16_t>() : nullptr;
  const auto* xd = x.data_as<uint16_t>();
  auto* yd = y.data_as<uint16_t>();
  // x quantized per token by the op that wrote it (hand_off), in one chunk: whole-row weights read it.
  const bool handed = G == 1 && handoff_.x == x.data() && handoff_.rows == M && handoff_.K == K && M <= chunk;
  handoff_ = {};
  if (G != 1) {  // 128x128 blocks: the library scales; the bias and a chunk's last M % 4 rows after it
    const float* grid = block_grid(w, s);
    for (int m0 = 0; m0 < M; m0 += chunk) {
      const int m = std::min(chunk, M - m0), ml = lt_rows(m, N, K, true);
      const int64_t r0 = int64_t(m0) * K, o0 = int64_t(m0) * N;
      GS_CUDA_CHECK(cuda::fp8_quantize_groups(xd + r0, ml, K, xq_.data_as<uint8_t>(), xs_.data_as<float>(), s));
      lt_->matmul(xq_.data_as<uint8_t>(), w.data_as<uint8_t>(), yd + o0, ml, N, K, s, grid, xs_.data_as<float>());
      if (b) GS_CUDA_CHECK(cuda::add_bias<cuda::bf16_t>(yd + o0, false, b, ml, N, s));
      if (ml < m)
        GS_CUDA_CHECK(cuda::fp8_gemv(xd + r0 + int64_t(ml) * K, w.data_as<uint8_t>(), w.scales().data_as<float>(), G, b,
                                     yd + o0 + int64_t(ml) * N, false, m - ml, N, K, s));
      then(m0, m, cuda::OutputScales{});
    }
    return;
  }
  const cuda::OutputScales sc{xs_.data_as<float>(), w.scales().data_as<float>(), b};
  for (int m0 = 0; m0 < M; m0 += chunk) {
    const int m = std::min(chunk, M - m0);
    if (!handed)
      GS_CUDA_CHECK(
          cuda::fp8_quantize_rows(xd + int64_t(m0) * K, m, K, xq_.data_as<uint8_t>(), xs_.data_as<float>(), s));
    lt_->matmul(xq_.data_as<uint8_t>(), w.data_as<uint8_t>(), yd + int64_t(m0) * N, m, N, K, s);
    then(m0, m, sc);
  }
}

const float* Fp8Linear::block_grid(const Tensor& w, cudaStream_t s) {
  const auto* p = w.data_as<uint8_t>();
  if (const auto it = grids_.find(p); it != grids_.end()) return it->second.data_as<float>();
  const int N = int(w.dim(0)), G = int(w.scales().dim(1));
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  GS_CUDA_CHECK(cudaStreamIsCapturing(s, &capturing));
  Tensor grid = grid_;
  if (capturing == cudaStreamCaptureStatusNone)
    grid = grids_[p] = Tensor::empty({(N + 127) / 128 * G}, DType::F32, alloc_);
  GS_CUDA_CHECK(cuda::fp8_block_grid(w.scales().data_as<float>(), N, G, grid.data_as<float>(), s));
  return grid.data_as<float>();
}

cuda::QuantizedOut Fp8Linear::handoff_scratch(int64_t rows, int64_t K) const {
  if (!opts_.quantize_in_producer || !opts_.lt_fp8_gemm || rows <= 0 || rows > opts_.lt_max_rows ||
      xq_.numel() < rows * K || xs_.numel() < rows)
    return {};
  return {xq_.data_as<uint8_t>(), xs_.data_as<float>()};
}

void Fp8Linear::hand_off(const Tensor& x) { handoff_ = {x.data(), x.dim(0), x.row_elems()}; }

bool Fp8Linear::scales_in_epilogue(const Tensor& x, const Tensor& w, const Tensor& y) {
  return opts_.lt_fused_epilogues && w.dtype() == DType::F8E4M3 && w.scales().defined() && x.dtype() == DType::BF16 &&
         x.ndim() >= 1 && x.row_elems() == w.dim(1) && !fuses(x, w) && !gemv_takes(x, w) && lt_takes(x, w, y);
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
    GS_CUDA_CHECK(
        cuda::fp8_skinny_gemm(x.data_as<cuda::bf16_t>(), scaled(w), b, y.data(), y.dtype() == DType::F32, M, N, K, s));
    return;
  }
  if (gemv_takes(x, w)) {
    GS_CUDA_CHECK(cuda::fp8_gemv(x.data_as<uint16_t>(), w.data_as<uint8_t>(), w.scales().data_as<float>(), G, b,
                                 y.data(), y.dtype() == DType::F32, M, N, K, s));
    return;
  }
  if (lt_takes(x, w, y)) {
    linear_unscaled(x, w, bias, y, s, [&](int m0, int m, const cuda::OutputScales& sc) {
      if (sc.row)
        GS_CUDA_CHECK(
            cuda::fp8_scale_output(y.data_as<uint16_t>() + int64_t(m0) * N, sc.row, sc.col, sc.bias, m, N, s));
    });
    return;
  }
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

GemmTuningReport Fp8Linear::tune_gemms(const GemmTuningOptions& opts, cudaStream_t s) {
  if (!lt_) return {};
  return lt_->tune(
      opts,
      [this](int M, int N, int K, bool block) {
        const int gemv = std::min(opts_.gemv_max_tokens, cuda::kFp8GemvMaxM);
        const int skinny =
            block ? cuda::kFp8BlockSkinnyMaxM : skinny_limit(opts_, int64_t(N) * K <= cuda::kSkinnySmallWeights);
        return M <= opts_.lt_max_rows && M > std::max(gemv, skinny);
      },
      s);
}

bool Fp8Linear::gemv_takes(const Tensor& x, const Tensor& w) const {
  const int64_t M = x.dim(0);
  return M <= std::min(opts_.gemv_max_tokens, cuda::kFp8GemvMaxM) &&
         cuda::fp8_gemv_supported(int(M), int(w.dim(1)), x.data(), w.data());
}

bool Fp8Linear::fuses(const Tensor& x, const Tensor& w) const {
  const int64_t M = x.ndim() >= 1 ? x.dim(0) : 0;
  return M >= 1 && M <= skinny_limit(opts_, w.dim(0) * w.dim(1) <= cuda::kSkinnySmallWeights) &&
         x.dtype() == DType::BF16 && w.scales().defined() && x.row_elems() == w.dim(1) &&
         cuda::fp8_skinny_supported(int(M), int(w.dim(1)), int(w.scales().dim(1)), x.data(), w.data());
}

bool Fp8Linear::fuses_norm(const RmsNormInput& norm, const Tensor& x, const Tensor& w) const {
  const Tensor& r = norm.residual;
  const int64_t M = x.dim(0), K = w.dim(1);
  return r.defined() && r.dtype() == DType::F32 && r.device().is_cuda() && r.ndim() == 2 && r.dim(0) == M &&
         r.dim(1) == K && norm.weight.dtype() == DType::BF16 && norm.weight.device().is_cuda() &&
         norm.weight.numel() == K &&
         cuda::fp8_skinny_norm_supported(int(M), int(K), int(w.scales().dim(1)), r.data_as<float>(),
                                         norm.weight.data_as<cuda::bf16_t>(), w.data());
}

cuda::Fp8Scaled Fp8Linear::scaled(const Tensor& w) {
  const int G = int(w.scales().dim(1));
  return {w.data_as<uint8_t>(), w.scales().data_as<float>(), G, G != 1 && block_rows_aligned(w)};
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
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_gated(act, input(x, norm), scaled(w), out.data_as<cuda::bf16_t>(), int(x.dim(0)),
                                            int(out.row_elems()), int(w.dim(1)), s));
}

void Fp8Linear::linear_normed(const RmsNormInput& norm, const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Tensor& y, cudaStream_t s) {
  GS_CHECK(y.dtype() == DType::BF16 || y.dtype() == DType::F32, "linear: y {} must be bf16 or f32", y.str());
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm(input(x, &norm), scaled(w),
                                      bias.defined() ? bias.data_as<cuda::bf16_t>() : nullptr, y.data(),
                                      y.dtype() == DType::F32, int(x.dim(0)), int(w.dim(0)), int(w.dim(1)), s));
}

void Fp8Linear::linear_add_residual(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& residual,
                                    cudaStream_t s) {
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_add_residual(input(x, norm), scaled(w), residual.data_as<float>(), int(x.dim(0)),
                                                   int(w.dim(0)), int(w.dim(1)), s));
}

void Fp8Linear::linear_peer_sum(const Tensor& x, const Tensor& w, const Tensor& y, const AddRmsNorm& a,
                                cudaStream_t s) {
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_peer_sum(x.data_as<cuda::bf16_t>(), scaled(w), y.data_as<cuda::bf16_t>(),
                                               a.residual.data_as<float>(), a.weight.data_as<cuda::bf16_t>(), a.eps,
                                               a.out.data_as<cuda::bf16_t>(), int(w.dim(0)), int(w.dim(1)), *a.peer_sum,
                                               s));
}

Fp8Linear::HeadNorm Fp8Linear::head_norm_kernel(const Tensor& x, const RmsNormInput* norm, const Tensor& w,
                                                int D) const {
  const int64_t M = x.dim(0), K = w.dim(1);
  if (fuses_head_norm(M, K)) return cuda::skinny_qk_norm_supported(D) ? HeadNorm::Skinny : HeadNorm::None;
  const Tensor& sc = w.scales();
  return M == 1 && head_norm_gemv_at_one_token(w, D) &&
                 cuda::gemv_fp8_qk_norm_supported(int(K), D, int(sc.dim(1)), input(x, norm), w.data(),
                                                  sc.data_as<float>())
             ? HeadNorm::Gemv
             : HeadNorm::None;
}

bool Fp8Linear::head_norm_gemv_at_one_token(const Tensor& w, int D) const {
  const Tensor& sc = w.scales();
  return opts_.head_norm_gemv && !fuses_head_norm(1, w.dim(1)) && sc.defined() &&
         cuda::gemv_fp8_qk_norm_shape_supported(int(w.dim(1)), D, int(sc.dim(1)));
}

void Fp8Linear::linear_qkv_rope(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& bias,
                                const Tensor& positions, const Tensor& inv_freq, int head_dim, int long_from,
                                const Tensor& q, const Tensor& k, const Tensor& v, cudaStream_t s,
                                const cuda::QkNorm<cuda::bf16_t>& qk, const cuda::GemvInput<cuda::bf16_t>* gemv_in) {
  const int D = head_dim;
  const auto* b = bias.defined() ? bias.data_as<cuda::bf16_t>() : nullptr;
  if (qk.q && head_norm_kernel(x, norm, w, D) == HeadNorm::Gemv) {
    GS_CUDA_CHECK(cuda::gemv_fp8_qkv_rope_head_norm(
        gemv_in ? *gemv_in : input(x, norm), w.data_as<uint8_t>(), w.scales().data_as<float>(), int(w.scales().dim(1)),
        b, positions.data_as<int32_t>(), inv_freq.data_as<float>(), q.data_as<cuda::bf16_t>(),
        k.data_as<cuda::bf16_t>(), v.data_as<cuda::bf16_t>(), int(q.row_elems() / D), int(k.row_elems() / D), D,
        int(w.dim(1)), long_from, s, qk));
    return;
  }
  GS_CUDA_CHECK(cuda::fp8_skinny_gemm_qkv_rope(
      input(x, norm), scaled(w), b, positions.data_as<int32_t>(), inv_freq.data_as<float>(), q.data_as<cuda::bf16_t>(),
      k.data_as<cuda::bf16_t>(), v.data_as<cuda::bf16_t>(), int(x.dim(0)), int(q.row_elems() / D),
      int(k.row_elems() / D), D, int(w.dim(1)), long_from, s, qk));
}

std::string Fp8Linear::describe() const {
  return fmt::format(
      "whole-row scales up to {} tokens (weights of at most 2^23 elements: {}), 128x128 blocks up to {}: the skinny "
      "tensor-core kernel on weights widened to bf16 in registers, with the RoPE split, gated activation and both "
      "halves of the deferred norm fused; Qwen3's QKV with its q/k head norm at one token: {}; blocks of K not a "
      "multiple of 128: the FP8 GEMV up to {} tokens; above: {}",
      skinny_limit(opts_, false), skinny_limit(opts_, true),
      std::min(skinny_limit(opts_, false), cuda::kFp8BlockSkinnyMaxM),
      opts_.head_norm_gemv ? fmt::format("the FP8 GEMV with the head norm below K {}, the skinny kernel's from it",
                                         opts_.head_norm_min_k)
                           : fmt::format("the skinny kernel's head norm from K {}", opts_.head_norm_min_k),
      std::min(opts_.gemv_max_tokens, cuda::kFp8GemvMaxM),
      !opts_.lt_fp8_gemm
          ? std::string("the weight dequantized to bf16 + the bf16 GEMM")
          : fmt::format("cuBLASLt FP8 e4m3 GEMM ({}) on x quantized per token{}, unit scales, then the per-token "
                        "x per-channel scales and bias {}; 128x128 block-scaled weights: cuBLASLt's block-scaled "
                        "FP8 GEMM on x quantized per token and 128 columns",
                        opts_.lt_fast_accum ? "the tensor cores' accumulation" : "sums promoted to f32",
                        opts_.lt_fused_epilogues && opts_.quantize_in_producer
                            ? fmt::format(" (by the gated activation from {} tokens and the residual add + norm that "
                                          "write it, steps of up to {} tokens)",
                                          kGatedHandoffMinTokens, opts_.lt_max_rows)
                            : std::string(),
                        opts_.lt_fused_epilogues ? "applied by the RoPE split, gated activation or residual add + "
                                                   "norm that reads the product (else one epilogue kernel)"
                                                 : "in one epilogue kernel"));
}

}  // namespace gs
