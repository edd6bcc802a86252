// Cascade attention (vLLM's and FlashInfer's): when every request of a batch reads the same leading
// KV blocks (a shared system prompt, taken from the prefix cache), attention runs in two parts: the
// shared prefix once for all queries of the batch (no causal mask: every query lies after it),
// then each request's own suffix, causally; the two partial results are merged by their
// log-sum-exp. The prefix's KV is read once instead of once per request.
//
// Cascade steps run their attention eagerly, so they dispatch to PIECEWISE (or NONE), never
// FULL (docs/CUDA_GRAPHS.md §4); the prefix length is a host field of the step's metadata.
#pragma once
#include <cstdint>
#include <span>

namespace gs {

// The batch's shared prefix in tokens: the leading block-table columns every request holds alike,
// capped by each request's tokens computed before this step (the prefix must precede every query
// and is not written this step), in whole blocks. 0 with fewer than two requests.
//   block_table [num_reqs, width] row-major, seq_lens [num_reqs] (context after the step),
//   query_start_loc [num_reqs + 1].
int common_prefix_len(std::span<const int32_t> block_table, int width, std::span<const int32_t> seq_lens,
                      std::span<const int32_t> query_start_loc, int num_reqs, int block_size);

// When cascade attention pays off (vLLM's use_cascade_attention): at least 256 shared tokens and
// 8 requests; a batch that is not pure decode always cascades then. A decode batch of grouped-query
// heads would otherwise run flash-decoding (each request's KV split over CTAs, the query group in
// one tile), so cascade must win the model of both as waves of `num_sms` CTAs over 128-token KV
// tiles: cascade's prefix CTAs (query heads x 128-query tiles) against flash-decoding's (requests
// x kv heads, each over the whole prefix). Sliding-window models never cascade (the caller checks).
struct CascadeHeuristic {
  int min_prefix_len = 256;
  int min_reqs = 8;
  int num_sms = 1;     // parallel units of the device (the CPU: one, where reading the prefix once always wins)
  int max_tokens = 0;  // > 0: batches of more tokens never cascade (what the backend's workspace holds)
};
bool use_cascade_attention(int prefix_len, std::span<const int32_t> query_start_loc, int num_reqs, int num_heads,
                           int num_kv_heads, const CascadeHeuristic& h);

// One query head's partial attention over a key range: running max m, normaliser l (sum of
// exp(s - m)) and the unnormalised value sum. merge() combines two ranges' partials by their
// log-sum-exp, as if both ranges had been one.
struct SoftmaxPartial {
  float m;
  float l;
};
// out = (acc_a * e^(m_a - m) + acc_b * e^(m_b - m)) / (l_a e^(m_a - m) + l_b e^(m_b - m)), m = max(m_a, m_b).
void merge_partials(const SoftmaxPartial& a, const float* acc_a, const SoftmaxPartial& b, const float* acc_b, int d,
                    float* out);

}  // namespace gs
