// Fp8Linear: the CUDA backend's linear() for FP8 e4m3 weights (ops/fp8_weights.h) and their
// quantization at load. Small token counts (decode) run the FP8 GEMV, which streams half the
// bytes of bf16; larger ones run cuBLASLt's FP8 GEMM on activations quantized per token (scales
// and bias applied after it, ops/cuda/fp8_lt_gemm.h), or, where that is not available (128x128
// block-scaled weights, a shape the library refuses, an f32 output), the weight dequantized to
// bf16 through one persistent scratch and the bf16 GEMM.
// The fused decode epilogues (deferred norm, RoPE split, SiLU x up, residual add) are not fused
// with FP8 weights: the backend runs them as their separate kernels after this linear.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "ops/cuda/fp8_lt_gemm.h"
#include "ops/kernel_options.h"

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
