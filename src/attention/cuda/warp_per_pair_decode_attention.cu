// Implements warp_per_pair_decode_attention (attention/cuda/decode_attention.h).
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/prefill_attention.h"
#include "attention/cuda/warp_per_pair_kernel.cuh"

namespace gs::cuda {

namespace {

// Warps a pair, from the padded shape: 1 from kOneWarpPairs pairs (every pair in flight at once),
// else 2 (each takes every other round of keys); o.warps_per_pair (1, 2 or 4) overrides.
constexpr int kOneWarpPairs = 1024;
int warps_per_pair(const PagedAttentionParams& p, const AttentionKernelOptions& o) {
  if (o.warps_per_pair == 1 || o.warps_per_pair == 2 || o.warps_per_pair == 4) return o.warps_per_pair;
  return p.num_reqs_padded * p.hkv >= kOneWarpPairs ? 1 : 2;
}

}  // namespace

cudaError_t warp_per_pair_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                           int T, cudaStream_t s) {
  using warp_per_pair::kWarps;
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p) || p.D != 128 || p.hq / p.hkv > kWarpPerPairMaxGroup)
    return cudaErrorInvalidValue;
  const int W = warps_per_pair(p, o);
  const int warps = (p.num_reqs_padded + 1) * p.hkv * W;
  const dim3 grid(unsigned((warps + kWarps - 1) / kWarps));
  return launch_pdl(warp_per_pair::warp_per_pair_decode_kernel<128, kWarpPerPairMaxGroup, 4>, grid, kWarps * 32, 0, s,
                    p, window, T, W);
}

}  // namespace gs::cuda
