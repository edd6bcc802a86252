// Implements decode_splits (attention/cuda/decode_attention.h).
#include <algorithm>

#include "attention/cuda/decode_attention.h"

namespace gs::cuda {

namespace {
constexpr int kMaxDecodeSplits = 64;
}  // namespace

int decode_splits(const PagedAttentionParams& p, const AttentionKernelOptions& o, int T, int gx) {
  if (!p.split_workspace || !p.split_counters || gx * p.hkv > kSplitCounters) return 1;
  const int pairs = std::max(1, p.num_reqs_padded * p.hkv);
  const int by_ctx = p.max_blocks_per_req * p.block_size / (kDecodeTileKeys * std::max(1, o.decode_split_min_tiles));
  const int by_ws = int(split_workspace_floats(p.D) / (size_t(T) * p.hq * (p.D + 2)));
  const int target = std::max(1, o.decode_split_target);
  const int S = std::min({(target + pairs - 1) / pairs, kMaxDecodeSplits, by_ctx, by_ws});
  return std::max(S, 1);
}

}  // namespace gs::cuda
