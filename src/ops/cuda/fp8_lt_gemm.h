// Fp8LtGemm: y[M, N] (bf16) = x_q[M, K] . w_q[N, K]^T on the FP8 tensor cores through cuBLASLt,
// unscaled; x_q and its token scales come from cuda::fp8_quantize_rows. The library runs with unit
// scales (its default per-tensor scalar mode: the FP8 GEMM every FP8-capable cuBLASLt has, where
// per-token x per-channel "outer vector" scales are not available on Hopper) and writes the
// unscaled product as bf16, whose f32 exponent range e4m3 products summed over K cannot overflow;
// the caller applies both scale vectors and the bias after it (ops/cuda/fp8_linear.h: a pass of
// its own, or inside the op that consumes y). 128x128 block-scaled weights take Hopper's block
// modes instead (w's BLK128x128 grid [ceil(N / 128), K / 128] row-major, x's VEC128 scales per token
// and 128 columns [K / 128, M] token-minor, cuda::fp8_quantize_groups), and y comes out scaled. Their kernels tile
// 128 x 128, so a weight of few 128-row tiles leaves most SMs idle at decode batch sizes: with
// `block_split_k`, up to 64 tokens, where the heuristic's algorithm does not split K, K is split
// over the idle SMs (shares of at least 4 blocks, summed in f32). With `fast_accum`, the unscaled
// GEMM keeps its sums in the FP8 MMA's accumulator instead of promoting them to f32 along K.
// Plans (descriptors, the algorithm) are cached per shape; a shape the library refuses is
// remembered and reported, so the caller falls back. tune() times the plans' candidates at start-up
// as LtGemm::tune does for bf16 (ops/cuda/lt_tuner.h).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <tuple>

#include "core/tensor.h"
#include "ops/cuda/lt_tuner.h"
#include "ops/gemm_tuning.h"

namespace gs {

class Fp8LtGemm {
 public:
  Fp8LtGemm(Allocator& alloc, bool block_split_k, bool fast_accum);
  ~Fp8LtGemm();
  Fp8LtGemm(const Fp8LtGemm&) = delete;
  Fp8LtGemm& operator=(const Fp8LtGemm&) = delete;

  // Whether the library has an algorithm for this shape, unscaled or block-scaled (host-only; cached).
  bool supported(int M, int N, int K, bool block = false);
  // Enqueues the GEMM (supported(M, N, K, block) must be true): unscaled, or where w_grid is set,
  // block-scaled by w_grid and x_groups (the layouts above).
  void matmul(const uint8_t* xq, const uint8_t* wq, uint16_t* y, int M, int N, int K, cudaStream_t s,
              const float* w_grid = nullptr, const float* x_groups = nullptr);

  // Whether the caller runs an M-row GEMM of this shape here (not on its skinny kernel or GEMV).
  using RunsHere = std::function<bool(int M, int N, int K, bool block)>;
  // Tunes every shape matmul() has run, unscaled and block-scaled, at each M of opts.sizes up to
  // the largest M it ran with where `here` holds (the recorded buffers are reused for timing: their
  // contents are overwritten). Synchronizes `s`; never while capturing.
  GemmTuningReport tune(const GemmTuningOptions& opts, const RunsHere& here, cudaStream_t s);

 private:
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan(int M, int N, int K, bool block);
  // One GEMM of plan p with `algo`, the scale pointers set first where w_grid is set.
  cublasStatus_t run(Plan& p, const cublasLtMatmulAlgo_t& algo, const void* xq, const void* wq, void* y, cudaStream_t s,
                     const void* w_grid, const void* x_groups);
  // The block-scaled plan's algorithm with K split over the SMs its tiles leave idle, where it
  // takes a split and the heuristic chose none.
  void split_k(Plan& p, int M, int N, int K);

  bool block_split_k_, fast_accum_;
  cublasLtHandle_t handle_ = nullptr;
  Tensor workspace_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
  std::map<std::tuple<int, int, bool>, LtSeen> seen_;  // by (N, K, block)
};

}  // namespace gs
