// Implements keys_as_rows_decode_attention (attention/cuda/decode_attention.h).
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/keys_as_rows_kernel.cuh"
#include "attention/cuda/prefill_attention.h"

namespace gs::cuda {

namespace {

// The keys-as-rows decode kernel with NS K/V stages (D 64: 3, D 128: 2; on an e4m3 cache, F8, twice
// that in the same shared memory), each context split as the tensor-core decode kernel splits it
// (decode_splits).
template <int D, int NS, bool F8 = false>
cudaError_t launch_keys_as_rows(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window, int T,
                                cudaStream_t s) {
  using C = keys_as_rows::Cfg<D, NS, F8>;
  constexpr auto kernel = keys_as_rows::keys_as_rows_decode_kernel<D, NS, F8>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::smem));
  if (attr != cudaSuccess) return attr;
  const int gx = p.num_reqs_padded + 1;
  const DecodeSplit split = decode_splits(p, o, T, gx);
  const dim3 grid(unsigned(gx), unsigned(p.hkv), unsigned(split.splits));
  return launch_pdl(kernel, grid, C::threads, C::smem, s, p, window, T, split, o.keys_as_rows_early_loads);
}

static_assert(keys_as_rows::kMaxG == kKeysAsRowsMaxGroup, "the selection's limit is the keys-as-rows kernel's");

}  // namespace

cudaError_t keys_as_rows_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                          int T, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p) || p.hq / p.hkv > kKeysAsRowsMaxGroup) return cudaErrorInvalidValue;
  if (p.fp8_cache)  // e4m3 stages: twice the stages in the same shared memory
    return p.D == 128 ? launch_keys_as_rows<128, 4, true>(p, o, window, T, s)
                      : launch_keys_as_rows<64, 6, true>(p, o, window, T, s);
  return p.D == 128 ? launch_keys_as_rows<128, 2>(p, o, window, T, s) : launch_keys_as_rows<64, 3>(p, o, window, T, s);
}

}  // namespace gs::cuda
