// Implements keys_as_rows_decode_attention (attention/cuda/decode_attention.h).
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/keys_as_rows_kernel.cuh"
#include "attention/cuda/prefill_attention.h"
#include "core/cuda/cuda_device.h"

namespace gs::cuda {

namespace {

// The keys-as-rows decode kernel with NS K/V stages, each context split as the tensor-core decode
// kernel splits it (decode_splits).
template <int D, int NS, bool F8 = false>
cudaError_t launch_keys_as_rows(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window, int T,
                                const dim3& grid, const DecodeSplit& split, cudaStream_t s) {
  using C = keys_as_rows::Cfg<D, NS, F8>;
  constexpr auto kernel = keys_as_rows::keys_as_rows_decode_kernel<D, NS, F8>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::smem));
  if (attr != cudaSuccess) return attr;
  return launch_pdl(kernel, grid, C::threads, C::smem, s, p, window, T, split, o.keys_as_rows_early_loads);
}

// The CTAs of keys_as_rows_decode_kernel<D, NS, F8> the GPU holds at once (its SMs times the CTAs an
// SM takes; 0 where the kernel cannot run).
template <int D, int NS, bool F8 = false>
int wave() {
  using C = keys_as_rows::Cfg<D, NS, F8>;
  constexpr auto kernel = keys_as_rows::keys_as_rows_decode_kernel<D, NS, F8>;
  static const int ctas =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::smem)) != cudaSuccess
          ? 0
          : cuda_kernel_wave(reinterpret_cast<const void*>(kernel), C::threads, C::smem);
  return ctas;
}

// The wave decode_splits sizes a launch on p for: that of the kernel it takes. Head dim 128 counts
// the three-stage kernel's where that option is on: a launch within it takes those stages
// (deep_stages).
int split_wave(const PagedAttentionParams& p, const AttentionKernelOptions& o) {
  if (p.fp8_cache) return p.D == 128 ? wave<128, 4, true>() : wave<64, 6, true>();
  if (p.D == 128) return o.keys_as_rows_deep_stages ? wave<128, 3>() : wave<128, 2>();
  return wave<64, 3>();
}

// Whether a head-dim-128 launch takes three K/V stages (AttentionKernelOptions::keys_as_rows_deep_stages):
// its CTAs that can do work (a request's splits, and split 0 of the tail column) fit one wave of
// that kernel, so they all run at once with 96 KB of stages each.
bool deep_stages(const PagedAttentionParams& p, const AttentionKernelOptions& o, const DecodeSplit& split) {
  const int64_t ctas = (int64_t(p.num_reqs_padded) * split.splits + 1) * p.hkv;
  return o.keys_as_rows_deep_stages && p.D == 128 && ctas <= wave<128, 3>();
}

static_assert(keys_as_rows::kMaxG == kKeysAsRowsMaxGroup, "the selection's limit is the keys-as-rows kernel's");

}  // namespace

cudaError_t keys_as_rows_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                          int T, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p) || p.hq / p.hkv > kKeysAsRowsMaxGroup) return cudaErrorInvalidValue;
  const int gx = p.num_reqs_padded + 1;
  const DecodeSplit split = decode_splits(p, o, T, gx, split_wave(p, o));
  const dim3 grid(unsigned(gx), unsigned(p.hkv), unsigned(split.splits));
  if (p.fp8_cache)  // e4m3 stages: twice the stages in the same shared memory
    return p.D == 128 ? launch_keys_as_rows<128, 4, true>(p, o, window, T, grid, split, s)
                      : launch_keys_as_rows<64, 6, true>(p, o, window, T, grid, split, s);
  // Stages of 32 KB (D 128) or 16 KB (D 64): 64 / 48 KB keep three or four CTAs an SM; the deep
  // count at D 128, 96 KB, two. At D 64 three stages already hold a 192-key context.
  if (deep_stages(p, o, split)) return launch_keys_as_rows<128, 3>(p, o, window, T, grid, split, s);
  return p.D == 128 ? launch_keys_as_rows<128, 2>(p, o, window, T, grid, split, s)
                    : launch_keys_as_rows<64, 3>(p, o, window, T, grid, split, s);
}

}  // namespace gs::cuda
