// Fp8LtGemm: y[M, N] (bf16) = (x_q[M, K] . w_q[N, K]^T) * x_scale[m] * w_scale[n] (+ bias[n]) on
// the FP8 tensor cores through cuBLASLt; x_q and x_scale come from cuda::fp8_quantize_rows.
// The library runs with unit scales (its default per-tensor scalar mode: the FP8 GEMM every
// FP8-capable cuBLASLt has, where per-token x per-channel "outer vector" scales are not available
// on Hopper) and writes the unscaled product as bf16, whose f32 exponent range e4m3 products
// summed over K cannot overflow; cuda::fp8_scale_output then applies both scale vectors and the
// bias in one pass, rounding once more to bf16. Plans (descriptors, the heuristic's algorithm)
// are cached per shape; a shape the library refuses is remembered and reported, so the caller
// falls back.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "core/tensor.h"

namespace gs {

class Fp8LtGemm {
 public:
  explicit Fp8LtGemm(Allocator& alloc);
  ~Fp8LtGemm();
  Fp8LtGemm(const Fp8LtGemm&) = delete;
  Fp8LtGemm& operator=(const Fp8LtGemm&) = delete;

  // Whether the library has an algorithm for this shape (host-only; cached).
  bool supported(int M, int N, int K);
  // Enqueues the GEMM and its scales (supported(M, N, K) must be true); bias bf16 [N] or null.
  void matmul(const uint8_t* xq, const float* x_scale, const uint8_t* wq, const float* w_scale, const uint16_t* bias,
              uint16_t* y, int M, int N, int K, cudaStream_t s);

 private:
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan(int M, int N, int K);

  cublasLtHandle_t handle_ = nullptr;
  Tensor workspace_;
  std::map<std::tuple<int, int, int>, Plan> plans_;
};

}  // namespace gs
