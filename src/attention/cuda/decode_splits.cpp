// Implements decode_splits (attention/cuda/decode_attention.h).
#include <algorithm>

#include "attention/cuda/decode_attention.h"

namespace gs::cuda {

DecodeSplit decode_splits(const PagedAttentionParams& p, const AttentionKernelOptions& o, int T, int gx, int wave) {
  const int min_tiles = std::max(1, o.decode_split_min_tiles), max_tiles = std::max(0, o.decode_split_max_tiles);
  if (!p.split_workspace || !p.split_counters || gx * p.hkv > kSplitCounters) return {1, 1, min_tiles, max_tiles};
  const int pairs = std::max(1, p.num_reqs_padded * p.hkv);
  const int ctx_tiles = p.max_blocks_per_req * p.block_size / kDecodeTileKeys;
  // The tail column's split 0 of each kv head also holds its room while it works.
  const int ctas = o.decode_split_target > 0 ? o.decode_split_target : std::max(1, wave - p.hkv);
  const int base = std::max(1, ctas / pairs);  // at most ctas: a wave's CTAs stay one wave
  const int by_len = max_tiles > 0 ? (ctx_tiles + max_tiles - 1) / max_tiles : 1;
  const int by_ws = int(split_workspace_floats(p.D) / (size_t(T) * p.hq * (p.D + 2)));
  const int S = std::min({std::max(base, by_len), kMaxDecodeSplits, ctx_tiles / min_tiles, by_ws});
  return {std::max(S, 1), base, min_tiles, max_tiles};
}

}  // namespace gs::cuda
