// The tensor-core paged attention for prefill and mixed batches (bf16 in / fp32 accumulate: wgmma
// m64n64k16 on sm_90a at head dim 64 unless AttentionKernelOptions::prefill_wgmma is off, mma.sync
// m16n8k16 otherwise): FlashAttention-2 tiling with online softmax, variable-length queries per
// request over the paged KV cache, causal mask, optional sliding window, GQA heads packed into the
// tile's rows (tensor_core_attention.cuh). It takes the flash-decoding kernel's parameters (its
// split workspace unused) and has the same contract.
//
// Like flash_decoding_attention, it writes the new tokens' k, v into the cache in the same kernel and
// reads the new positions straight from k, v; every per-batch value comes from device buffers and
// the grid depends only on (T, num_reqs_padded, hkv), so it is safe inside a captured graph.
#pragma once
#include <cuda_runtime.h>

#include "attention/attention_kernel_selection.h"
#include "attention/cuda/paged_attention_params.h"
#include "ops/kernel_options.h"

namespace gs::cuda {

// Whether the tensor-core kernels handle these parameters: bf16 (not f32), head_dim 64 or 128,
// hq / hkv <= kTensorCoreMaxGroup, 16-byte aligned q, k, v, out and cache (soft-capping aside:
// tensor_core_attention_fits adds that).
bool prefill_attention_supported(const PagedAttentionParams& p);
// Whether q, k, v, out and both caches are 16-byte aligned (the tensor-core kernels' vector loads).
bool attention_buffers_aligned16(const PagedAttentionParams& p);

// Same contract as flash_decoding_attention (flash_decoding_attention.h): cache writes of tokens t < T, causal
// attention of each request's new queries over its context, zero rows for tokens of no request
// and for queries with an empty context. window > 0: a query at position p sees only keys in
// (p - window, p]; <= 0: no window.
cudaError_t prefill_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window, int T,
                              cudaStream_t s);

// Query rows (tokens x heads of a kv head) of one CTA of the kernel prefill_attention runs under o
// at head dim D.
int prefill_tile_rows(const AttentionKernelOptions& o, int D);

// A cascade prefix pass (p.cascade_pass == kCascadePrefix, cascade_attention.h) on that kernel: the
// prefix's key tiles split into `splits` equal parts over grid z (splits <= the prefix's 64-key
// tiles), each part's partials into its slot of p.cascade_partials.
cudaError_t cascade_prefix_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int T, int splits,
                                     cudaStream_t s);

}  // namespace gs::cuda
