// The device side of the flagless exchange between tensor-parallel ranks (ops/peer_sum.h): the
// sentinel, the spinning loads that wait on the data itself, the refill of a used buffer, and the
// residual add + RMSNorm of a row summed over the ranks. Shared by the custom all-reduce's fused
// kernel (distributed/cuda/custom_all_reduce_kernels.cu) and the projection that sums its ranks'
// partials itself (gemv_peer_sum, ops/cuda/kernels.h).
#pragma once
#include <cstdint>
#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/peer_sum.h"

namespace gs::cuda {

// The sentinel (negative zero) as a 32-bit pattern of two bf16 or one f32.
template <typename T>
constexpr uint32_t kSentinel = std::is_same_v<T, float> ? 0x80000000u : 0x80008000u;

template <typename T>
__device__ __forceinline__ bool has_sentinel(const uint4& v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  bool hit = false;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, float>)
      hit |= w[i] == kSentinel<T>;
    else
      hit |= (w[i] & 0xffffu) == 0x8000u || (w[i] >> 16) == 0x8000u;
  }
  return hit;
}

// What a rank sends of a value: -0 as +0 (every other value unchanged), so it is never taken for
// the sentinel.
__device__ __forceinline__ float sendable(float v) { return v + 0.0f; }

// p[0 .. packs) = the 32-bit pattern, over the grid (each thread a stride of the whole grid).
__device__ __forceinline__ void fill_packs(uint4* p, size_t packs, uint32_t pattern) {
  const uint4 fill = make_uint4(pattern, pattern, pattern, pattern);
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += size_t(gridDim.x) * blockDim.x)
    p[i] = fill;
}

__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// load8 from an exchange buffer: waits until a peer's write has replaced every sentinel.
template <typename T>
__device__ __forceinline__ void spin_load8(const T* p, float* f) {
  const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < 8 / kVecElems<T>; ++i) {
    uint4 u = load_volatile(v + i);
    while (has_sentinel<T>(u)) u = load_volatile(v + i);
    unpack_vec<T>(u, f + i * kVecElems<T>);
  }
}

// 8-element chunks a thread holds of a row in add_norm_row: a row of at most 32 x the block's threads.
constexpr int kNormChunks = 4;

// Whether a projection of N outputs whose blocks have `threads` threads can sum its ranks' partials
// (its last block holds the row in add_norm_row's chunks) ...
constexpr bool peer_sum_shape_fits(int N, int threads) { return N > 0 && N % 8 == 0 && N <= 8 * kNormChunks * threads; }
// ... and whether ps takes its rows of elem_bytes elements.
inline bool peer_sum_fits(const PeerSum& ps, int N, size_t elem_bytes) {
  return ps.world >= 2 && ps.world <= kPeerSumMaxRanks &&
         size_t(ps.world) * size_t(N) * elem_bytes <= ps.buffer_bytes && ps.state != nullptr;
}

// The residual add + RMSNorm of one row of a sum over `world` ranks, by the whole block: part(p, e,
// f) loads rank p's 8 elements at element e of the row into f; they are summed in rank order (f32)
// and rounded to T, as the all-reduce writes them; then residual[base ..] += the sum and out[base
// ..] = rms_norm(residual) * w, with the thread layout of the backend's vectorised add_rms_norm
// (thread t holds chunks t, t + blockDim.x, ... in registers). hidden <= 8 kNormChunks blockDim.x.
template <typename T, typename Part>
__device__ __forceinline__ void add_norm_row(const Part& part, int world, float* residual, const T* w, float eps,
                                             T* out, int64_t base, int hidden) {
  float v[kNormChunks][8];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormChunks; ++j) {
    const int e = (threadIdx.x + j * blockDim.x) * 8;
    if (e >= hidden) break;
    float sum[8], p8[8], r[8];
    part(0, e, sum);
    for (int p = 1; p < world; ++p) {
      part(p, e, p8);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum[i] += p8[i];
    }
    load8(residual + base + e, r);
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = v[j][i] = r[i] + to_f(from_f<T>(sum[i]));
    store8(residual + base + e, r);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[j][i] * v[j][i];
  }
  rms_norm_store(v, ss, hidden, eps, int(blockDim.x), out + base, [w](int, int e, float* wf) { load8(w + e, wf); });
}

// Call c's exchange buffer of rank p (buffer c % 3 of its three). The table is indexed by constants
// only: a runtime index would copy the kernel parameter to the stack.
template <typename T>
__device__ __forceinline__ T* peer_buffer(const PeerSum& ps, int p, uint32_t call) {
  void* base = nullptr;
#pragma unroll
  for (int r = 0; r < kPeerSumMaxRanks; ++r)
    if (r == p) base = ps.buffers[r];
  return reinterpret_cast<T*>(static_cast<char*>(base) + (call % 3) * ps.buffer_bytes);
}

}  // namespace gs::cuda
