// Fp8LtGemm: y[M, N] (bf16) = (x_q[M, K] . w_q[N, K]^T) * x_scale[m] * w_scale[n] on the FP8
// tensor cores through cuBLASLt, with per-token activation and per-channel weight scales as
// "outer vector" scale pointers (the library applies them in its epilogue). x_q and x_scale come
// from cuda::fp8_quantize_rows. Plans (descriptors, the heuristic's algorithm) are cached per
// shape; a shape the library refuses is remembered and reported, so the caller falls back.
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
  // Enqueues the GEMM (supported(M, N, K) must be true).
  void matmul(const uint8_t* xq, const float* x_scale, const uint8_t* wq, const float* w_scale, uint16_t* y, int M,
              int N, int K, cudaStream_t s);

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
