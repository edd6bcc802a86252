// Launcher of the tensor-core (bf16 in / fp32 accumulate: wgmma m64n64k16 on sm_90a for head_dim
// 64 prefill unless AttentionKernelOptions::prefill_wgmma is off; mma.sync m16n8k16 otherwise) paged attention for
// prefill and mixed batches: FlashAttention-2 tiling with online softmax, variable-length
// queries per request over the paged KV cache, causal mask, optional sliding window, GQA heads
// packed into the tile's rows. It takes the flash-decoding kernel's parameters (its split
// workspace unused) and has the same contract.
//
// Like paged_attention, it writes the new tokens' k, v into the cache in the same kernel and
// reads the new positions straight from k, v; every per-batch value comes from device buffers and
// the grid depends only on (T, num_reqs_padded, hkv), so it is safe inside a captured graph.
#pragma once
#include <cuda_runtime.h>

#include "attention/attention_kernel_selection.h"
#include "attention/cuda/attention_kernels.h"
#include "ops/kernel_options.h"

namespace gs::cuda {

// Whether the tensor-core kernels handle these parameters: bf16 (not f32), head_dim 64 or 128,
// hq / hkv <= kTensorCoreMaxGroup, 16-byte aligned q, k, v, out and cache (soft-capping aside:
// tensor_core_attention_fits adds that).
bool prefill_attention_supported(const PagedAttentionParams& p);
// Whether q, k, v, out and both caches are 16-byte aligned (the tensor-core kernels' vector loads).
bool attention_buffers_aligned16(const PagedAttentionParams& p);

// Same contract as paged_attention (attention_kernels.h): cache writes of tokens t < T, causal
// attention of each request's new queries over its context, zero rows for tokens of no request
// and for queries with an empty context. window > 0: a query at position p sees only keys in
// (p - window, p]; <= 0: no window. Tiles of 64 query rows per warp (128 per CTA).
cudaError_t prefill_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window, int T,
                              cudaStream_t s);

// The same contract for batches whose requests all have few new tokens (decode, speculative
// verification): the smaller 64-row tile, and, when p has a split workspace, each context split
// over several CTAs (flash-decoding: the split count from the padded shape, the splits used from
// the actual context; the last CTA of each split group merges).
cudaError_t tensor_core_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                         int T, cudaStream_t s);

// The same contract for single-token decode (every request at most one new token), on the kernel
// with the keys as the MMA's rows (decode_mma.cuh); hq / hkv <= kKeysAsRowsMaxGroup; contexts
// split as tensor_core_decode_attention splits them.
cudaError_t keys_as_rows_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                          int T, cudaStream_t s);

// The same contract for decode batches (short queries) at head dim 128, hq / hkv <=
// kWarpPerPairMaxGroup, on CUDA cores: one or more warps per (request, kv head) pair
// (decode_warp.cuh).
cudaError_t warp_per_pair_decode_attention(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window,
                                           int T, cudaStream_t s);

}  // namespace gs::cuda
