// Implements attention/cuda/fp8_kv_cache.h: one thread per 8 elements of a row of k and of v.
#include "attention/cuda/fp8_kv_cache.h"

#include <cstdint>

#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    write_fp8_kv_cache_kernel(PagedAttentionParams p, int T, float k_inv, float v_inv) {
  pdl_wait();  // k, v come from the previous kernel
  pdl_trigger();
  const int chunks = p.hkv * p.D / 8;  // 8-element chunks of a token's row
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= int64_t(T) * chunks) return;
  const int t = int(c / chunks), ch = int(c % chunks);
  const int64_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) return;
  const int64_t src = int64_t(t) * chunks + ch, dst = slot * chunks + ch;  // in chunks of 8 elements
  reinterpret_cast<uint2*>(p.k_cache)[dst] = bf16x8_to_e4m3x8(reinterpret_cast<const uint4*>(p.k)[src], k_inv);
  reinterpret_cast<uint2*>(p.v_cache)[dst] = bf16x8_to_e4m3x8(reinterpret_cast<const uint4*>(p.v)[src], v_inv);
}

}  // namespace

cudaError_t write_fp8_kv_cache(const PagedAttentionParams& p, int T, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  if (p.f32 || p.D % 8 != 0 || !(p.k_scale > 0.0f) || !(p.v_scale > 0.0f)) return cudaErrorInvalidValue;
  const int64_t threads = int64_t(T) * p.hkv * p.D / 8;
  const unsigned blocks = unsigned((threads + kThreads - 1) / kThreads);
  return launch_pdl(write_fp8_kv_cache_kernel, dim3(blocks), kThreads, 0, s, p, T, 1.0f / p.k_scale, 1.0f / p.v_scale);
}

}  // namespace gs::cuda
