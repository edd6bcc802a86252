// Implements attention/attention_kernel_selection.h.
#include "attention/attention_kernel_selection.h"

#include <algorithm>

namespace gs {

namespace {

int group(const AttentionLaunch& l) { return l.num_kv_heads > 0 ? l.num_heads / l.num_kv_heads : 0; }

bool warp_per_pair_fits(const AttentionLaunch& l, const AttentionKernelOptions& o) {
  const int pairs = l.num_reqs_padded * l.num_kv_heads;
  return o.warp_per_pair_min_pairs > 0 && l.head_dim == 128 && group(l) <= kWarpPerPairMaxGroup &&
         pairs >= o.warp_per_pair_min_pairs && (o.warp_per_pair_max_pairs <= 0 || pairs < o.warp_per_pair_max_pairs);
}

}  // namespace

bool tensor_core_attention_fits(const AttentionLaunch& l) {
  const int G = group(l);
  return l.bf16 && l.aligned16 && (l.head_dim == 64 || l.head_dim == 128) && l.num_kv_heads > 0 &&
         l.num_heads % l.num_kv_heads == 0 && G >= 1 && G <= kTensorCoreMaxGroup && l.softcap == 0.0f && !l.sinks;
}

AttentionKernel select_attention_kernel(const AttentionLaunch& l, const AttentionKernelOptions& o) {
  if (l.fp8_cache) {
    if (l.max_query_len >= kPrefillMinQueryLen) return AttentionKernel::TensorCorePrefill;
    if (l.max_query_len == 1 && group(l) <= kKeysAsRowsMaxGroup) return AttentionKernel::KeysAsRowsDecode;
    return AttentionKernel::TensorCoreDecode;
  }
  if (l.sinks) {  // the prefill kernel adds them to its normalisation; the decode kernels do not
    AttentionLaunch without = l;
    without.sinks = false;
    const bool prefill = l.max_query_len >= kPrefillMinQueryLen && !l.fp8_cache;
    return o.tensor_core && prefill && tensor_core_attention_fits(without) ? AttentionKernel::TensorCorePrefill
                                                                           : AttentionKernel::FlashDecoding;
  }
  if (!o.tensor_core || !tensor_core_attention_fits(l)) return AttentionKernel::FlashDecoding;
  if (l.max_query_len >= kPrefillMinQueryLen) return AttentionKernel::TensorCorePrefill;
  const bool warp_per_pair = warp_per_pair_fits(l, o);
  if (l.max_query_len == 1 && o.keys_as_rows_decode && group(l) <= kKeysAsRowsMaxGroup && !warp_per_pair)
    return AttentionKernel::KeysAsRowsDecode;
  if (!o.tensor_core_decode || l.num_reqs_padded < 1) return AttentionKernel::FlashDecoding;
  return warp_per_pair ? AttentionKernel::WarpPerPairDecode : AttentionKernel::TensorCoreDecode;
}

bool cascade_attention_fits(const AttentionLaunch& l, const AttentionKernelOptions& o) {
  return o.tensor_core && tensor_core_attention_fits(l) && !l.fp8_cache;
}

AttentionKernel select_cascade_suffix_kernel(const AttentionLaunch& l) {
  return l.max_query_len >= kPrefillMinQueryLen ? AttentionKernel::TensorCorePrefill
                                                : AttentionKernel::TensorCoreDecode;
}

int mla_expanded_first_request(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                               int num_reqs, int max_ctx) {
  if (max_ctx <= 0 || query_start_loc.size() != size_t(num_reqs) + 1 || seq_lens.size() != size_t(num_reqs))
    return num_reqs;
  int first = num_reqs;
  while (first > 0 && query_start_loc[size_t(first)] - query_start_loc[size_t(first - 1)] >= kMlaExpandedMinQueryLen &&
         seq_lens[size_t(first - 1)] <= max_ctx)
    --first;
  return first;
}

int mla_expanded_scratch_rows(int64_t row_bytes, int64_t max_context, int quantum) {
  const auto rows = [&](int64_t bytes) { return bytes / row_bytes / quantum * quantum; };
  const int64_t lo = rows(kMlaExpandedScratchMinBytes), hi = rows(kMlaExpandedScratchMaxBytes);
  return int(std::clamp((max_context + quantum - 1) / quantum * quantum, lo, hi));
}

}  // namespace gs
