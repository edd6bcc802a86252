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
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "ops/cuda/lt_tuner.h"
#include "ops/gemm_tuning.h"

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

  // Strided batches of one shape: for b < count, y_b = x_b w_b^T with x_b = x + b x_stride (its
  // rows ldx elements apart), w_b = w + b w_stride, y_b = y + b y_stride (its rows ldy apart;
  // elements of each one's dtype); w_kn: each w_b is stored [K, N] (w_b^T's rows) instead of
  // [N, K]. The heuristic's algorithm, never tuned.
  struct Batch {
    int count = 1;
    int64_t ldx = 0;  // 0: K
    int64_t x_stride = 0, w_stride = 0, y_stride = 0;
    int64_t ldy = 0;  // 0: N
    bool w_kn = false;
    auto key() const { return std::tuple{count, ldx, x_stride, w_stride, y_stride, ldy, w_kn}; }
  };
  void matmul_batched(const void* x, const void* w, void* y, bool in_f32, bool y_f32, int M, int N, int K,
                      const Batch& batch, cudaStream_t s);

  // Whether a GEMM of M rows of this shape runs elsewhere (the backend's GEMV or skinny GEMM), so
  // needs no tuning.
  using RunsElsewhere = std::function<bool(int M, int N, int K, const void* x, const void* w)>;
  // Tunes (ops/cuda/lt_tuner.h) every (N, K) shape matmul() has run at each M of opts.sizes up to
  // the largest M it ran with (its buffers are reused for timing: their contents are overwritten).
  // `dtype` names the compute dtype in the cache key. Synchronizes `s`; never while capturing.
  GemmTuningReport tune(const GemmTuningOptions& opts, const std::string& dtype, const RunsElsewhere& elsewhere,
                        cudaStream_t s);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  void run(const Plan& p, const void* x, const void* w, void* y, cudaStream_t s);
  using Key = std::tuple<int, int, int, bool, bool, std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, bool>>;
  Plan& plan(int M, int N, int K, bool in_f32, bool y_f32, const Batch& batch);
  Plan& plan(int M, int N, int K, bool in_f32, bool y_f32) { return plan(M, N, K, in_f32, y_f32, Batch{}); }

  cublasLtHandle_t handle_ = nullptr;
  Tensor workspace_;
  std::map<Key, Plan> plans_;
  std::map<std::tuple<int, int, bool, bool>, LtSeen> seen_;  // by (N, K, in_f32, y_f32)
};

}  // namespace gs
