// Fp8Linear: the CUDA backend's linear() for FP8 e4m3 weights (ops/fp8_weights.h) and their
// quantization at load. Decode batches on whole-row-scaled weights run the skinny tensor-core
// kernel on weights widened to bf16 in registers (half the bytes of bf16), which also takes the
// decode epilogues (RoPE split, gated activation) and both halves of the deferred norm (the residual
// add after o_proj / down, the norm of the residual before QKV / gate-up, computed in the kernel);
// 128x128
// block-scaled weights run the CUDA-core FP8 GEMV up to 8 tokens. Larger batches run cuBLASLt's
// FP8 GEMM on activations quantized per token (scales and bias applied after it,
// ops/cuda/fp8_lt_gemm.h), or, where that is not available (block-scaled weights, a shape the
// library refuses, an f32 output), the weight dequantized to bf16 through one persistent scratch
// and the bf16 GEMM.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "ops/cuda/fp8_lt_gemm.h"
#include "ops/gated_activation.h"
#include "ops/kernel_options.h"
#include "ops/linear_op.h"

namespace gs {

class Fp8Linear {
 public:
  Fp8Linear(Allocator& alloc, Fp8KernelOptions opts) : alloc_(alloc), opts_(opts) {}

  // Backend::quantize_fp8 for an F8E4M3 dst (scratch sized here, at load, never in a capture).
  void quantize(const Tensor& src, int64_t group_rows, bool block128, const Tensor& dst, cudaStream_t s);
  // y = x w^T (+ bias) for an FP8 w; x, bias bf16; y bf16 or f32. `dense(wb)` runs the backend's
  // bf16 linear on wb, w's dequantization, when neither FP8 kernel takes the shape.
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, cudaStream_t s,
              const std::function<void(const Tensor& wb)>& dense);
  std::string describe() const;

  // Whether the skinny FP8 kernel, and so the fused forms below, take x [M, K] (bf16) times w.
  bool fuses(const Tensor& x, const Tensor& w) const;
  // ... and whether they take x = rms_norm(norm) computed in the kernel (fuses(x, w) holds; the
  // residual f32 [M, K] on the GPU, the norm weight bf16 [K]).
  bool fuses_norm(const RmsNormInput& norm, const Tensor& x, const Tensor& w) const;
  // The fused forms (fuses(x, w) holds; the caller checked the epilogue's own shapes), on x, or
  // where norm is non-null (fuses_norm holds) on rms_norm(*norm), x left unwritten:
  // out = act(x . gate) * (x . up) for w = [gate; up];
  void linear_gated(GatedActivation act, const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& out,
                    cudaStream_t s);
  // residual (f32) += x w^T rounded to bf16;
  void linear_add_residual(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& residual,
                           cudaStream_t s);
  // split_qkv_rope (no q/k norm) of x w^T + bias, inv_freq the RoPE table of head_dim.
  void linear_qkv_rope(const Tensor& x, const RmsNormInput* norm, const Tensor& w, const Tensor& bias,
                       const Tensor& positions, const Tensor& inv_freq, int head_dim, int long_from, const Tensor& q,
                       const Tensor& k, const Tensor& v, cudaStream_t s);

 private:
  bool run_lt(const Tensor& x, const Tensor& w, const uint16_t* bias, const Tensor& y, int M, int N, int K,
              cudaStream_t s);

  Allocator& alloc_;
  Fp8KernelOptions opts_;
  std::unique_ptr<Fp8LtGemm> lt_;
  Tensor dequant_;                         // bf16, as large as the largest FP8 weight
  Tensor xq_, xs_;                         // e4m3 [lt_max_rows, largest K] and f32 [lt_max_rows]: x quantized per token
  const uint8_t* weight_begin_ = nullptr;  // the weight being quantized (quantize's fused parts)
  const uint8_t* part_end_ = nullptr;
  bool warned_ = false;
};

}  // namespace gs
