// LtGemm: y[M, N] = x[M, K] w[N, K]^T through cuBLASLt, bf16 or f32 inputs, fp32 accumulation
// (f32 inputs use full fp32 arithmetic, no TF32: the f32 backend is the accurate mode).
//
// The workspace is allocated once at construction (so a captured matmul never allocates), and
// the descriptors and the heuristic's algorithm are cached per (M, N, K, output dtype): the
// first call of a shape should happen eagerly (warm-up), the heuristic query is host-only anyway.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/tensor.h"

namespace gs {

class LtGemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // Hopper's recommended 32 MiB

  explicit LtGemm(Allocator& alloc);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // x, w device pointers, both f32 (in_f32) or both bf16; y f32 (y_f32) or the inputs' type.
  void matmul(const void* x, const void* w, void* y, bool in_f32, bool y_f32, int M, int N, int K, cudaStream_t s);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int, bool, bool>;
  const Plan& plan(int M, int N, int K, bool in_f32, bool y_f32);

  cublasLtHandle_t handle_ = nullptr;
  Tensor workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace gs
