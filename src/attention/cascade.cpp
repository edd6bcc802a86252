// Implements attention/cascade.h.
#include "attention/cascade.h"

#include <algorithm>
#include <cmath>

namespace gs {

namespace {
int cdiv(int64_t a, int64_t b) { return int((a + b - 1) / b); }
}  // namespace

int common_prefix_len(std::span<const int32_t> block_table, int width, std::span<const int32_t> seq_lens,
                      std::span<const int32_t> query_start_loc, int num_reqs, int block_size) {
  if (num_reqs < 2 || width <= 0) return 0;
  int computed = seq_lens[0];
  for (int r = 0; r < num_reqs; ++r)
    computed = std::min(computed, seq_lens[size_t(r)] - (query_start_loc[size_t(r) + 1] - query_start_loc[size_t(r)]));
  const int max_blocks = std::min(width, std::max(0, computed) / block_size);
  int shared = 0;
  for (; shared < max_blocks; ++shared) {
    const int32_t id = block_table[size_t(shared)];
    if (id < 0) break;  // a block given back (sliding windows)
    bool same = true;
    for (int r = 1; r < num_reqs && same; ++r) same = block_table[size_t(r) * size_t(width) + size_t(shared)] == id;
    if (!same) break;
  }
  return shared * block_size;
}

bool use_cascade_attention(int prefix_len, std::span<const int32_t> query_start_loc, int num_reqs, int num_heads,
                           int num_kv_heads, const CascadeHeuristic& h) {
  if (prefix_len < h.min_prefix_len || num_reqs < std::max(2, h.min_reqs)) return false;
  if (h.max_tokens > 0 && query_start_loc[size_t(num_reqs)] > h.max_tokens) return false;
  bool all_decode = true;
  for (int r = 0; r < num_reqs && all_decode; ++r)
    all_decode = query_start_loc[size_t(r) + 1] - query_start_loc[size_t(r)] == 1;
  const int group = num_heads / std::max(1, num_kv_heads);
  if (!(all_decode && group > 1)) return true;  // flash-decoding is no alternative: cascade
  constexpr int kTile = 128;
  const int sms = std::max(1, h.num_sms);
  const int prefix_tiles = cdiv(prefix_len, kTile);
  const int64_t cascade_time = int64_t(cdiv(int64_t(num_heads) * cdiv(num_reqs, kTile), sms)) * prefix_tiles;
  const int64_t flash_ctas = int64_t(num_reqs) * num_kv_heads * cdiv(group, kTile) * prefix_tiles;
  return cascade_time < cdiv(flash_ctas, sms);
}

void merge_partials(const SoftmaxPartial& a, const float* acc_a, const SoftmaxPartial& b, const float* acc_b, int d,
                    float* out) {
  const float m = std::max(a.m, b.m);
  const float wa = a.l > 0 ? std::exp(a.m - m) : 0.0f, wb = b.l > 0 ? std::exp(b.m - m) : 0.0f;
  const float inv = 1.0f / (a.l * wa + b.l * wb);
  for (int i = 0; i < d; ++i) out[i] = (acc_a[i] * wa + acc_b[i] * wb) * inv;
}

}  // namespace gs
