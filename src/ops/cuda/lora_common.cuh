// Device helpers shared by the batched LoRA kernels (lora_shrink.cu, lora_expand.cu,
// lora_fused.cu): 16-byte dots, the B^T rows of a column chunk held across pdl_wait(). Included
// by those .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/lora_kernels.h"

namespace gs::cuda::lora {

inline unsigned ceil_div(int a, int b) { return unsigned((a + b - 1) / b); }
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T>
__device__ __forceinline__ float dot_vec(const uint4& xv, const uint4& av) {
  constexpr int E = kVecElems<T>;
  float xf[E], af[E];
  unpack_vec<T>(xv, xf);
  unpack_vec<T>(av, af);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < E; ++i) acc = fmaf(xf[i], af[i], acc);
  return acc;
}

// The LoRA delta of one chunk of 8 columns of a token: sum of tr[r] * b[r N .. r N + 8) over the
// rank rows r = first, first + step, ... < rows (b: the slot's first rank row of the target at
// the chunk's first column; tr: the token's tmp at the same row). The first kHeld of those rows
// are loaded before pdl_wait() (adapter weights do not change while a graph runs); b null
// (a base-model row, a chunk past the row's end) adds nothing.
template <typename T, int kHeld>
struct ChunkRows {
  static constexpr int E = kVecElems<T>, V = 8 / E;  // 16-byte vectors per chunk row
  const T* b;
  int64_t N;
  int first, step, rows;
  uint4 held[kHeld][V];

  __device__ const uint4* row(int r) const { return reinterpret_cast<const uint4*>(b + int64_t(r) * N); }
  __device__ void prefetch() {
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int r = first + u * step;
#pragma unroll
      for (int i = 0; i < V; ++i) held[u][i] = b && r < rows ? __ldg(row(r) + i) : make_uint4(0, 0, 0, 0);
    }
  }
  __device__ static void fma_row(const uint4* w, float c, float* acc) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float f[E];
      unpack_vec<T>(w[i], f);
#pragma unroll
      for (int j = 0; j < E; ++j) acc[i * E + j] = fmaf(c, f[j], acc[i * E + j]);
    }
  }
  // acc[0 .. 8) += the delta; after pdl_wait() (the shrink wrote tr).
  __device__ void accumulate(const float* tr, float* acc) const {
    if (!b) return;
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int r = first + u * step;
      if (r < rows) fma_row(held[u], tr[r], acc);
    }
    for (int r = first + kHeld * step; r < rows; r += step) {
      uint4 w[V];
#pragma unroll
      for (int i = 0; i < V; ++i) w[i] = __ldg(row(r) + i);
      fma_row(w, tr[r], acc);
    }
  }
};

// Token t's rank rows of its slot in tmp (LoraTmp); null for a base-model row.
__device__ __forceinline__ const float* tmp_row(const LoraTmp& tmp, int64_t t, int slot, bool lora) {
  return lora ? tmp.p + t * tmp.ld + int64_t(slot) * tmp.slot_stride : nullptr;
}

// Rank rows of a chunk a fused-op thread holds across pdl_wait(): 64 registers at one chunk.
template <typename T>
constexpr int kHeldRows = sizeof(T) == 2 ? 16 : 8;

}  // namespace gs::cuda::lora
