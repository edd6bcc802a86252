// Launchers of the paged-attention kernels (bf16 q/k/v and cache, fp32 softmax and sums).
//
// Grids depend only on the padded shape (num_tokens, num_reqs_padded, head counts), never on
// per-batch values: every per-batch value is read from the device buffers, so one captured
// graph serves any batch that fits its shape.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

struct PagedAttentionParams {
  const uint16_t* q = nullptr;      // [T, hq * D]
  uint16_t* out = nullptr;          // [T, hq * D]
  const uint16_t* k_cache = nullptr;  // [num_blocks, block_size, hkv, D]
  const uint16_t* v_cache = nullptr;
  const int32_t* query_start_loc = nullptr;  // [num_reqs_padded + 1]
  const int32_t* seq_lens = nullptr;         // [num_reqs_padded]
  const int32_t* block_table = nullptr;      // [*, max_blocks_per_req]
  int num_reqs_padded = 0;
  int max_blocks_per_req = 0;
  int block_size = 0;
  int num_blocks = 0;
  int hq = 0, hkv = 0, D = 0;
  float scale = 1.0f;
};

// Largest head_dim the attention kernel handles.
constexpr int kMaxAttentionHeadDim = 256;

// cache[slot_mapping[t]] = k[t], v[t] for t < T; slots < 0 or >= num_slots are skipped.
cudaError_t reshape_and_cache(const uint16_t* k, const uint16_t* v, uint16_t* k_cache,
                              uint16_t* v_cache, const int32_t* slot_mapping, int T, int hkv, int D,
                              int64_t num_slots, cudaStream_t s);

// Causal paged attention of each of the T query tokens over its request's context; tokens of no
// request, and requests with an empty context, get zero output rows.
cudaError_t paged_attention(const PagedAttentionParams& p, int T, cudaStream_t s);

}  // namespace gs::cuda
