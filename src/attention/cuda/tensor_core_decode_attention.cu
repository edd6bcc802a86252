// Implements tensor_core_decode_attention (attention/cuda/decode_attention.h): the tensor-core
// kernel (tensor_core_attention.cuh) with 64-row tiles, each context split over CTAs.
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/prefill_attention.h"
#include "attention/cuda/tensor_core_attention.cuh"

namespace gs::cuda {

cudaError_t tensor_core_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                         int T, cudaStream_t s) {
  using tensor_core::launch_tensor_core;
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p)) return cudaErrorInvalidValue;
  if (p.fp8_cache)
    return p.D == 128 ? launch_tensor_core<128, 1, false, true, 0, true>(p, o, window, T, s)
                      : launch_tensor_core<64, 1, false, true, 0, true>(p, o, window, T, s);
  if (p.D == 128) return launch_tensor_core<128, 1, false, true>(p, o, window, T, s);
  return o.decode_four_ctas_per_sm ? launch_tensor_core<64, 1, false, true, 4>(p, o, window, T, s)
                                   : launch_tensor_core<64, 1, false, true>(p, o, window, T, s);
}

}  // namespace gs::cuda
