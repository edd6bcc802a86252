// Implements attention/cuda/prefill_attention.h: the tensor-core kernel (tensor_core_attention.cuh)
// with 128-row tiles for long queries.
#include "attention/cuda/prefill_attention.h"

#include <cstdint>

#include "attention/cuda/tensor_core_attention.cuh"

namespace gs::cuda {

namespace {

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

}  // namespace

bool attention_buffers_aligned16(const PagedAttentionParams& p) {
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.out), static_cast<const void*>(p.k_cache),
                          static_cast<const void*>(p.v_cache)})
    if (!aligned16(ptr)) return false;
  return true;
}

bool prefill_attention_supported(const PagedAttentionParams& p) {
  if (p.f32 || (p.D != 64 && p.D != 128)) return false;
  if (p.hkv <= 0 || p.hq % p.hkv != 0 || p.hq / p.hkv > kTensorCoreMaxGroup) return false;
  return attention_buffers_aligned16(p);
}

cudaError_t prefill_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window, int T,
                              cudaStream_t s) {
  using tensor_core::launch_tensor_core;
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p)) return cudaErrorInvalidValue;
  if (p.fp8_cache) {  // on mma.sync (f16 MMAs of the widened tiles) at either head dim
    if (p.D == 128) return launch_tensor_core<128, 1, false, false, 0, true>(p, o, window, T, s);
    return o.prefill_tiles_per_warp_d64 == 1 ? launch_tensor_core<64, 1, false, false, 0, true>(p, o, window, T, s)
                                             : launch_tensor_core<64, 2, false, false, 0, true>(p, o, window, T, s);
  }
  if (p.D == 128) return launch_tensor_core<128, 1, false>(p, o, window, T, s);
  if (o.prefill_wgmma) return launch_tensor_core<64, 1, true>(p, o, window, T, s);
  return o.prefill_tiles_per_warp_d64 == 1 ? launch_tensor_core<64, 1, false>(p, o, window, T, s)
                                           : launch_tensor_core<64, 2, false>(p, o, window, T, s);
}

int prefill_tile_rows(const AttentionKernelOptions& o, int D) {
  using tensor_core::Cfg;
  if (D == 128) return Cfg<128, 1, false>::rows;
  if (o.prefill_wgmma) return Cfg<64, 1, true>::rows;
  return o.prefill_tiles_per_warp_d64 == 1 ? Cfg<64, 1, false>::rows : Cfg<64, 2, false>::rows;
}

cudaError_t cascade_prefix_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int T, int splits,
                                     cudaStream_t s) {
  using tensor_core::launch_prefix_pass;
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p) || p.fp8_cache || p.cascade_pass != kCascadePrefix || splits < 1)
    return cudaErrorInvalidValue;
  if (p.D == 128) return launch_prefix_pass<128, 1, false>(p, T, splits, s);
  if (o.prefill_wgmma) return launch_prefix_pass<64, 1, true>(p, T, splits, s);
  return o.prefill_tiles_per_warp_d64 == 1 ? launch_prefix_pass<64, 1, false>(p, T, splits, s)
                                           : launch_prefix_pass<64, 2, false>(p, T, splits, s);
}

}  // namespace gs::cuda
