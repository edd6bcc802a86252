// The start-up tuner of cuBLASLt GEMMs (docs/CUDA_GRAPHS.md §9), shared by LtGemm (bf16 / f32) and
// Fp8LtGemm (e4m3, whole-row or 128x128 block scales).
//
// A plan's algorithm is the heuristic's first choice for its M. The tuner asks the heuristic for
// more candidates, times each on the buffers of the largest call recorded for the shape, cycling
// through the layers' weights (a run reads its weights from HBM as a step does, not from the L2
// the run before filled), and keeps the fastest when it beats the plan's algorithm by 2%. The
// winner also runs every smaller token count the graphs pad to that size
// (GemmTuningOptions::padded_from), and only candidates the library accepts at all of them
// compete: a batch gives the same bits eager and in its padded graph, whatever order the winner
// sums in. Winners go to the on-disk cache of ops/gemm_tuning.h, one file per compute dtype.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/gemm_tuning.h"

namespace gs {

// The buffers of the largest calls of one GEMM shape (N, K, types) seen so far: x, y and the
// distinct weights of the calls of that M (one per layer, at most kMaxWeights), each with its scales
// where the GEMM reads scale pointers (block-scaled FP8: w's block grid, x's group scales).
struct LtSeen {
  static constexpr size_t kMaxWeights = 64;
  struct Weight {
    const void* w = nullptr;
    const void* scales = nullptr;
    bool operator==(const Weight&) const = default;
  };
  const void* x = nullptr;
  const void* x_scales = nullptr;
  void* y = nullptr;
  std::vector<Weight> ws;
  int max_m = 0;

  void record(const void* x, Weight w, void* y, int M, const void* x_scales = nullptr);
};

// A plan's descriptors and its algorithm (replaced by the winner).
struct LtPlanRef {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t* algo = nullptr;
};

// One (shape, M) to tune: its plan, the plans of the token counts padded to M (which take the
// winner too), and a run of a given algorithm on the recorded buffers with their weight number i
// (cycled by the caller).
struct LtTunable {
  GemmShape shape;
  LtPlanRef plan;
  std::vector<LtPlanRef> padded;
  std::function<cublasStatus_t(const cublasLtMatmulAlgo_t& algo, size_t i)> run;
};

// The tunable of `shape` (M = shape.m): plan(M), and plan(m) of each token count the graphs pad to M
// (opts.padded_from) where runs(m) holds; its run is the caller's to set.
LtTunable lt_tunable(const GemmShape& shape, const GemmTuningOptions& opts, const std::function<bool(int M)>& runs,
                     const std::function<LtPlanRef(int M)>& plan);

// The GEMMs one cuBLASLt handle runs, tuned together under one cache key.
struct LtTuning {
  cublasLtHandle_t handle = nullptr;
  size_t workspace_bytes = 0;
  std::string dtype;  // the compute dtype, in the cache key ("bf16", "fp8-e4m3", ...)
  std::vector<LtTunable> gemms;
};

// Tunes (or reads from the cache) every GEMM of `t`. Synchronizes `s`; never while capturing.
GemmTuningReport lt_tune(LtTuning t, const GemmTuningOptions& opts, cudaStream_t s);

// Both reports as one (a backend tunes each GEMM family under its own cache key).
GemmTuningReport merge(GemmTuningReport a, const GemmTuningReport& b);

}  // namespace gs
