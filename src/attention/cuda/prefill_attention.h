// Launcher of the tensor-core (bf16 in / fp32 accumulate: wgmma m64n64k16 on sm_90a for head_dim
// 64 prefill, GS_PREFILL_WGMMA=0 for mma.sync there; mma.sync m16n8k16 otherwise) paged attention for
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

#include "attention/cuda/attention_kernels.h"

namespace gs::cuda {

// Whether prefill_attention handles these parameters: bf16 (not f32), head_dim 64 or 128,
// hq / hkv <= 64, 16-byte aligned q, k, v, out and cache.
bool prefill_attention_supported(const PagedAttentionParams& p);

// Same contract as paged_attention (attention_kernels.h): cache writes of tokens t < T, causal
// attention of each request's new queries over its context, zero rows for tokens of no request
// and for queries with an empty context. window > 0: a query at position p sees only keys in
// (p - window, p]; <= 0: no window.
// short_queries: every request has few new tokens (decode, speculative verification), so the
// smaller 64-row tile is used (most rows of a tile are empty then), and, when p has a split
// workspace, each context is split over several CTAs (flash-decoding: the split count from the
// padded shape, the splits used from the actual context; the last CTA of each split group merges).
cudaError_t prefill_attention(const PagedAttentionParams& p, int window, int T, bool short_queries, cudaStream_t s);

// Whether a single-token decode launch (every request at most one new token: max_query_len 1) of
// these parameters takes decode_attention: prefill_attention_supported, at most 8 query heads per kv
// head, no softcap, and not a launch the warp-per-pair kernel serves better (GS_DECODE_MMA=0: never).
bool decode_attention_takes(const PagedAttentionParams& p);
// The same contract as prefill_attention(short_queries) for such a launch, on the decode kernel with
// the keys as the MMA's rows (decode_mma.cuh); with a split workspace in p, each context is split
// over several CTAs as prefill_attention splits it.
cudaError_t decode_attention(const PagedAttentionParams& p, int window, int T, cudaStream_t s);

}  // namespace gs::cuda
