// LtGemm: y[M, N] = x[M, K] w[N, K]^T through cuBLASLt, bf16 or f32 inputs, fp32 accumulation
// (f32 inputs use full fp32 arithmetic, no TF32: the f32 backend is the accurate mode).
//
// The workspace is allocated once at construction (so a captured matmul never allocates), and
// the descriptors and the heuristic's algorithm are cached per (M, N, K, output dtype): the
// first call of a shape should happen eagerly (warm-up), the heuristic query is host-only anyway.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "ops/gemm_tuning.h"

namespace gs {

// The configuration fields of a cuBLASLt algorithm that decide its summation order: the kernel
// family (algorithm id), split-K and its reduction, custom options such as stream-K, the MMA inner
// shape. Candidates that differ from the heuristic's first choice only in tile, stages, swizzle or
// cluster shape sum each output in the same order, so a tuned graph gives the bits an untuned eager
// step of another M gives: the modes' greedy outputs stay equal to NONE's
// (tests/cuda/cuda_model_test.cpp). nullopt where the library does not report one of them.
std::optional<std::array<uint64_t, 5>> lt_algo_numerics(const cublasLtMatmulAlgo_t& algo);

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
  // rows ldx elements apart), w_b = w + b w_stride, y_b = y + b y_stride (elements of each one's
  // dtype). The heuristic's algorithm, never tuned.
  struct Batch {
    int count = 1;
    int64_t ldx = 0;  // 0: K
    int64_t x_stride = 0, w_stride = 0, y_stride = 0;
    auto key() const { return std::tuple{count, ldx, x_stride, w_stride, y_stride}; }
  };
  void matmul_batched(const void* x, const void* w, void* y, bool in_f32, bool y_f32, int M, int N, int K,
                      const Batch& batch, cudaStream_t s);

  // Whether a GEMM of M rows of this shape runs elsewhere (the backend's GEMV or skinny GEMM), so
  // needs no tuning.
  using RunsElsewhere = std::function<bool(int M, int N, int K, const void* x, const void* w)>;
  // Tunes every (N, K) shape matmul() has run at each M of opts.sizes up to the largest M it ran
  // with (its buffers are reused for timing: their contents are overwritten). `dtype` names the
  // compute dtype in the cache key. Synchronizes `s`; never while capturing.
  GemmTuningReport tune(const GemmTuningOptions& opts, const std::string& dtype, const RunsElsewhere& elsewhere,
                        cudaStream_t s);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // The largest calls of one (N, K, in_f32, y_f32) seen so far: their buffers time the candidates.
  // The distinct weights of those calls (one per layer) are cycled through, so a timed run reads
  // its weights from HBM as a model's step does, not from the L2 the previous run filled.
  static constexpr size_t kMaxWeights = 64;
  struct Seen {
    const void* x = nullptr;
    std::vector<const void*> ws;
    void* y = nullptr;
    int max_m = 0;
  };
  void record(Seen& seen, const void* x, const void* w, void* y, int M);
  void run(const Plan& p, const void* x, const void* w, void* y, cudaStream_t s);
  using Key = std::tuple<int, int, int, bool, bool, std::tuple<int, int64_t, int64_t, int64_t, int64_t>>;
  Plan& plan(int M, int N, int K, bool in_f32, bool y_f32, const Batch& batch);
  Plan& plan(int M, int N, int K, bool in_f32, bool y_f32) { return plan(M, N, K, in_f32, y_f32, Batch{}); }
  // The heuristic's candidates for a plan's descriptors, best first (at most `n`).
  std::vector<cublasLtMatmulAlgo_t> candidates(const Plan& p, int n) const;
  // Mean microseconds of one run of `algo` (or a negative number when the library refuses it).
  float time_algo(const Plan& p, const cublasLtMatmulAlgo_t& algo, const Seen& buf, cudaStream_t s);
  // Whether the library accepts a cached algorithm for this plan (cublasLtMatmulAlgoCheck).
  bool algo_valid(const Plan& p, const cublasLtMatmulAlgo_t& algo) const;
  // The cache key text (ops/gemm_tuning.h) of tuning `shapes` at `sizes`.
  std::string tuning_key(const std::string& dtype, const std::vector<GemmShape>& shapes) const;

  cublasLtHandle_t handle_ = nullptr;
  Tensor workspace_;
  std::map<Key, Plan> plans_;
  std::map<std::tuple<int, int, bool, bool>, Seen> seen_;
};

}  // namespace gs
