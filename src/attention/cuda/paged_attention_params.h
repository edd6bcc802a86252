// The parameters every paged-attention kernel takes (q/k/v in the compute dtype, bf16 or f32, and
// the cache in it or in e4m3; fp32 softmax and sums), and the split workspace they share.
//
// Every kernel's grid depends only on the padded shape (num_tokens, num_reqs_padded, head counts,
// the block table's width), never on per-batch values: every per-batch value is read from the
// device buffers, so one captured graph serves any batch that fits its shape.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gs::cuda {

struct PagedAttentionParams {
  const void* q = nullptr;  // [T, hq * D]
  const void* k = nullptr;  // [T, hkv * D]: the new tokens' keys, written to the cache
  const void* v = nullptr;  // [T, hkv * D]
  void* out = nullptr;      // [T, hq * D]
  void* k_cache = nullptr;  // [num_blocks, block_size, hkv, D]
  void* v_cache = nullptr;
  const int32_t* slot_mapping = nullptr;  // [T]; slots < 0 or >= num_slots are not written
  int64_t num_slots = 0;
  const int32_t* query_start_loc = nullptr;  // [num_reqs_padded + 1]
  const int32_t* seq_lens = nullptr;         // [num_reqs_padded]
  const int32_t* block_table = nullptr;      // [*, max_blocks_per_req]
  bool f32 = false;                          // element type: f32, else bf16
  // An e4m3 cache (attention/kv_cache.h; the tensor-core kernels only): every position reads as
  // the cache holds it, value = e4m3 * k_scale (folded into the softmax scale) or * v_scale
  // (applied to the output); this step's rows are written by write_fp8_kv_cache (fp8_kv_cache.h)
  // before the prefill / tensor-core decode kernels, by the keys-as-rows kernel itself. 1 for a
  // bf16 cache.
  bool fp8_cache = false;
  float k_scale = 1.0f, v_scale = 1.0f;
  int num_reqs_padded = 0;
  int max_blocks_per_req = 0;
  int block_size = 0;
  int num_blocks = 0;
  int hq = 0, hkv = 0, D = 0;
  float scale = 1.0f;
  int window = -1;               // sliding window: a query attends to its last `window` positions; <= 0: all
  float softcap = 0.0f;          // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
  const float* sinks = nullptr;  // [hq] f32 attention sinks (gpt-oss; flash-decoding and prefill), or null
  // Flash-decoding workspace (split_workspace_floats(D) floats, then kSplitCounters zeroed
  // counters that the kernel leaves zeroed again); null disables splitting.
  float* split_workspace = nullptr;
  unsigned* split_counters = nullptr;
  // Cascade attention (cascade_attention.h): which pass of it this launch is (kCascadeNone:
  // plain attention), the batch's shared prefix and the partials workspace both passes write.
  int cascade_pass = 0;
  int cascade_prefix_len = 0;
  float* cascade_partials = nullptr;
  int cascade_slots = 0;  // partials per (token, head): the prefix pass's splits, then the suffix's one
};

// The passes of a cascade launch. Prefix: every query of the batch (its tokens as one run, with
// no causal mask) against keys [0, cascade_prefix_len) through block-table row 0, split over grid
// z, each split's partial into slot z; no cache write. Suffix: the usual launch attending only keys
// from cascade_prefix_len on, its partial into the last slot instead of out.
constexpr int kCascadeNone = 0, kCascadePrefix = 1, kCascadeSuffix = 2;

// Counters the split path needs (one per (token, kv-head group) of a split launch).
constexpr int kSplitCounters = 512;

// Largest head_dim the attention kernel handles.
constexpr int kMaxAttentionHeadDim = 256;

// Floats of workspace the split (flash-decoding) path needs for head dim D, whatever T is.
size_t split_workspace_floats(int D);

}  // namespace gs::cuda
