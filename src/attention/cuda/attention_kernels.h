// Launchers of the paged-attention kernels (q/k/v and cache in the compute dtype, bf16 or f32;
// fp32 softmax and sums).
//
// Grids depend only on the padded shape (num_tokens, num_reqs_padded, head counts, the block
// table's width), never on per-batch values: every per-batch value is read from the device
// buffers, so one captured graph serves any batch that fits its shape.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gs::cuda {

struct PagedAttentionParams {
  const void* q = nullptr;        // [T, hq * D]
  void* out = nullptr;            // [T, hq * D]
  const void* k_cache = nullptr;  // [num_blocks, block_size, hkv, D]
  const void* v_cache = nullptr;
  const int32_t* query_start_loc = nullptr;  // [num_reqs_padded + 1]
  const int32_t* seq_lens = nullptr;         // [num_reqs_padded]
  const int32_t* block_table = nullptr;      // [*, max_blocks_per_req]
  bool f32 = false;                          // element type: f32, else bf16
  int num_reqs_padded = 0;
  int max_blocks_per_req = 0;
  int block_size = 0;
  int num_blocks = 0;
  int hq = 0, hkv = 0, D = 0;
  float scale = 1.0f;
  // Flash-decoding workspace (split_workspace_floats(D) floats); null disables splitting.
  float* split_workspace = nullptr;
};

// Largest head_dim the attention kernel handles.
constexpr int kMaxAttentionHeadDim = 256;

// Floats of workspace the split (flash-decoding) path needs for head dim D, whatever T is.
size_t split_workspace_floats(int D);

// How many CTAs each query token's context is split over for this padded shape (1 = no split):
// enough to fill the GPU when T x kv-head groups is small, at most one per 32 keys of the
// longest context the block table can address.
int attention_splits(int T, int hq, int hkv, int max_context);

// cache[slot_mapping[t]] = k[t], v[t] for t < T; slots < 0 or >= num_slots are skipped.
// elem_bytes: 2 (bf16) or 4 (f32).
cudaError_t reshape_and_cache(const void* k, const void* v, void* k_cache, void* v_cache,
                              const int32_t* slot_mapping, int T, int hkv, int D, int elem_bytes,
                              int64_t num_slots, cudaStream_t s);

// Causal paged attention of each of the T query tokens over its request's context; tokens of no
// request, and requests with an empty context, get zero output rows. Splits each context over
// attention_splits(...) CTAs (partial softmax states, then a combine kernel) when p has a
// workspace.
cudaError_t paged_attention(const PagedAttentionParams& p, int T, cudaStream_t s);

}  // namespace gs::cuda
