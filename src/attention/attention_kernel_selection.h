// Which attention kernel runs a launch: the one place that decides it, for every backend with
// several kernels (today the CUDA one, attention/cuda/cuda_attention.cpp). Pure host code, so the
// choice is unit-tested without a GPU (tests/attention/attention_kernel_selection_test.cpp).
//
// The choice depends only on values fixed for a captured graph (the layer's shape, the padded
// request count, the planned longest query), never on per-batch device values, so a graph's
// capture and its replays launch the same kernel.
#pragma once
#include <cstdint>
#include <span>

#include "ops/kernel_options.h"

namespace gs {

enum class AttentionKernel {
  FlashDecoding,      // CUDA cores, any dtype / head dim / softcap: the fallback (paged_attention)
  TensorCorePrefill,  // tensor cores, long queries (prefill, mixed batches): prefill_attention
  TensorCoreDecode,   // tensor cores, short queries, contexts split over CTAs: tensor_core_decode_attention
  KeysAsRowsDecode,   // tensor cores, one query a request, the keys as the MMA's rows
  WarpPerPairDecode,  // CUDA cores, one or more warps per (request, kv head) pair at head dim 128
};

// What the choice reads of a launch.
struct AttentionLaunch {
  bool bf16 = true;         // compute dtype bf16 (else f32)
  bool aligned16 = true;    // q, k, v, out and both caches 16-byte aligned
  int num_heads = 0;        // query heads (hq)
  int num_kv_heads = 0;     // hkv
  int head_dim = 0;         // D
  float softcap = 0.0f;     // > 0: logit soft-capping (only flash-decoding has it)
  bool sinks = false;       // attention sinks (gpt-oss; flash-decoding and the prefill kernel have them)
  int max_query_len = 0;    // the planned longest query (the padded shape's inside FULL graphs)
  int num_reqs_padded = 0;  // request rows of the launch
  bool fp8_cache = false;   // the KV cache holds e4m3 (attention/kv_cache.h)
};

// Queries at least this long run the prefill tile; shorter ones (decode, speculative verification)
// a decode kernel.
constexpr int kPrefillMinQueryLen = 16;
// Most query heads per kv head the tensor-core kernels hold (rows of a 64-row tile).
constexpr int kTensorCoreMaxGroup = 64;
// Most query heads per kv head the keys-as-rows kernel holds (the columns of its n8 tile).
constexpr int kKeysAsRowsMaxGroup = 8;
// Most query heads per kv head the warp-per-pair kernel keeps in registers.
constexpr int kWarpPerPairMaxGroup = 2;

// Whether the tensor-core kernels can run this launch: bf16, head dim 64 or 128, a GQA group of at
// most kTensorCoreMaxGroup, 16-byte aligned buffers, no soft-capping, no attention sinks.
bool tensor_core_attention_fits(const AttentionLaunch& l);

// The kernel for this launch under these options:
//  - on an e4m3 cache, the tensor-core kernels whatever the options (only they read one; a launch
//    they do not fit is refused before selection): prefill for queries of kPrefillMinQueryLen
//    tokens or more, keys-as-rows for one query a request (group <= kKeysAsRowsMaxGroup), else
//    the tensor-core decode kernel;
//  - with attention sinks, the tensor-core prefill kernel where it fits the rest and the queries
//    are long enough for it (it adds the sinks to its normalisation), else flash-decoding;
//  - flash-decoding when the tensor-core kernels are off or do not fit (f32, other head dims,
//    soft-capping);
//  - the tensor-core prefill kernel for queries of kPrefillMinQueryLen tokens or more;
//  - the warp-per-pair kernel for decode batches of o.warp_per_pair_min_pairs up to (not
//    including) o.warp_per_pair_max_pairs (request, kv head) pairs at head dim 128 and a group of
//    at most kWarpPerPairMaxGroup (it keeps every pair in flight where keys-as-rows' CTAs would run
//    a wave and a third);
//  - else, for one query a request, the keys-as-rows kernel (group <= kKeysAsRowsMaxGroup);
//  - else the tensor-core decode kernel (flash-decoding unless o.tensor_core_decode).
AttentionKernel select_attention_kernel(const AttentionLaunch& l, const AttentionKernelOptions& o);

// Cascade attention (attention/cascade.h) runs on the tensor-core kernels: its prefix pass on the
// prefill kernel (every query of the batch against the shared prefix fills its tiles), its suffix
// pass on the prefill kernel for queries of kPrefillMinQueryLen tokens or more, else on the
// tensor-core decode kernel (the kernels that write their partial softmax state for the merge).
// Whether a launch can cascade: the tensor-core kernels are on and fit it, on a cache of the
// compute dtype.
bool cascade_attention_fits(const AttentionLaunch& l, const AttentionKernelOptions& o);
AttentionKernel select_cascade_suffix_kernel(const AttentionLaunch& l);

// MLA (attention/mla_attention.h) on CUDA: which requests of an eager step run the expanded form.
// The first request of the batch's last run of requests that each have at least
// kMlaExpandedMinQueryLen queries and a context of at most max_ctx tokens (the expanded form's
// scratch); the requests before it run absorbed. num_reqs (none) where the host's copies of the
// batch are missing (a FULL graph's launch) or max_ctx is 0. The scheduler places running requests
// (decodes, continued chunks) before newly admitted prompts, so a step's new long prompts come
// last; a long chunk before a decode stays absorbed. The threshold: a request's context
// up-projection (512 x 256 multiply-adds a key and head at DeepSeek's shape) is shared by its
// queries, each of which saves ~770 multiply-adds a key and head against the absorbed form; chunks
// of 64 queries over a long context already gain (docs/PERF.md, MLA).
constexpr int kMlaExpandedMinQueryLen = 64;
int mla_expanded_first_request(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                               int num_reqs, int max_ctx);

// The expanded form's scratch in context rows of row_bytes each (a gathered latent row and its
// up-projected k_nope and v of every head): one request at the server's longest context
// (max_context; 0 when unknown), rounded up to `quantum` rows, within the byte bounds below. The
// floor keeps several short requests in one launch; the cap bounds what the scratch takes from the
// KV cache (DeepSeek-V2-Lite's 9,344 bytes a row: 114,816 rows in 1 GiB); a longer context runs
// absorbed.
constexpr int64_t kMlaExpandedScratchMinBytes = int64_t(256) << 20;
constexpr int64_t kMlaExpandedScratchMaxBytes = int64_t(1) << 30;
int mla_expanded_scratch_rows(int64_t row_bytes, int64_t max_context, int quantum);

}  // namespace gs
