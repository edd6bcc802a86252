// Launcher of the tensor-core (mma.sync m16n8k16, bf16 in / fp32 accumulate) paged attention for
// prefill and mixed batches: FlashAttention-2 tiling with online softmax, variable-length
// queries per request over the paged KV cache, causal mask, optional sliding window, GQA heads
// packed into the tile's rows.
//
// Like paged_attention, it writes the new tokens' k, v into the cache in the same kernel and
// reads the new positions straight from k, v; every per-batch value comes from device buffers and
// the grid depends only on (T, num_reqs_padded, hkv), so it is safe inside a captured graph.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

struct PrefillAttentionParams {
  const void* q = nullptr;  // bf16 [T, hq * D]
  const void* k = nullptr;  // bf16 [T, hkv * D]: the new tokens' keys, written to the cache
  const void* v = nullptr;  // bf16 [T, hkv * D]
  void* out = nullptr;      // bf16 [T, hq * D]
  void* k_cache = nullptr;  // bf16 [num_blocks, block_size, hkv, D]
  void* v_cache = nullptr;
  const int32_t* slot_mapping = nullptr;     // [T]; slots < 0 or >= num_slots are not written
  int64_t num_slots = 0;
  const int32_t* query_start_loc = nullptr;  // [num_reqs_padded + 1]
  const int32_t* seq_lens = nullptr;         // [num_reqs_padded]
  const int32_t* block_table = nullptr;      // [*, max_blocks_per_req]
  int num_reqs_padded = 0;
  int max_blocks_per_req = 0;
  int block_size = 0;
  int num_blocks = 0;
  int hq = 0, hkv = 0, D = 0;
  float scale = 1.0f;
  // Sliding window: a query at position p sees keys in (p - window, p]; <= 0 means no window.
  int window = -1;
};

// Whether prefill_attention handles this shape (bf16, head_dim 64 or 128, hq / hkv <= 64) with
// these pointers (16-byte aligned rows).
bool prefill_attention_supported(const PrefillAttentionParams& p);

// Same contract as paged_attention (attention_kernels.h): cache writes of tokens t < T, causal
// attention of each request's new queries over its context, zero rows for tokens of no request
// and for queries with an empty context.
cudaError_t prefill_attention(const PrefillAttentionParams& p, int T, cudaStream_t s);

}  // namespace gs::cuda
