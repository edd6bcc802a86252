// Cascade attention (attention/cascade.h): the CPU backend's two-part attention (the shared prefix
// once for the batch, each request's suffix, merged by log-sum-exp) equals one pass over each
// request's context, for shared prefixes of several lengths and mixed query lengths; the shared
// prefix of a batch's block tables; vLLM's heuristic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "attention/attention_backend.h"
#include "attention/cascade.h"

namespace gs {
namespace {

constexpr int kHq = 8, kHkv = 2, kD = 16, kBlock = 4, kBlocks = 160, kMaxBlocks = 72;

class CascadeAttention : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<AttentionBackend> attn = make_cpu_attention(*be, {kHq, kHkv, kD, 1.0f / std::sqrt(float(kD))});
  std::mt19937 rng{11};
  Tensor f32(const Shape& s) { return Tensor::empty(s, DType::F32, be->allocator()); }
  Tensor i32(const Shape& s) { return Tensor::empty(s, DType::I32, be->allocator()); }
  void fill(Tensor& t) {
    std::normal_distribution<float> n(0, 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = n(rng);
  }
};

// Requests (own computed tokens, new tokens) after a shared prefix of GetParam() tokens.
TEST_P(CascadeAttention, EqualsOnePassOverEachContext) {
  const int P = GetParam();
  const std::vector<std::pair<int, int>> reqs = {{0, 1}, {3, 1}, {5, 7}, {9, 2}, {0, 12}, {14, 1}};
  const int R = int(reqs.size());
  AttentionMetadata md;
  md.query_start_loc = i32({R + 1}), md.seq_lens = i32({R}), md.block_table = i32({R, kMaxBlocks});
  int T = 0;
  for (auto [own, q] : reqs) T += q;
  md.slot_mapping = i32({T});
  md.block_size = kBlock, md.max_blocks_per_req = kMaxBlocks, md.num_reqs = R;
  KVCacheLayer cache{f32({kBlocks, kBlock, kHkv, kD}), f32({kBlocks, kBlock, kHkv, kD})};
  fill(cache.k), fill(cache.v);  // the prefix's and every computed token's KV
  std::vector<int> free(kBlocks);
  for (int i = 0; i < kBlocks; ++i) free[size_t(i)] = i;
  std::shuffle(free.begin(), free.end(), rng);
  const int prefix_blocks = P / kBlock;
  std::vector<int> shared(free.end() - prefix_blocks, free.end());
  free.resize(free.size() - size_t(prefix_blocks));
  int t = 0;
  for (int r = 0; r < R; ++r) {
    const auto [own, q] = reqs[size_t(r)];
    const int ctx = P + own + q;
    int* row = md.block_table.data_as<int>() + r * kMaxBlocks;
    for (int b = 0; b < kMaxBlocks; ++b) row[b] = b < prefix_blocks ? shared[size_t(b)] : -1;
    for (int b = prefix_blocks; b < (ctx + kBlock - 1) / kBlock; ++b) row[b] = free.back(), free.pop_back();
    md.query_start_loc.data_as<int>()[r] = t;
    md.seq_lens.data_as<int>()[r] = ctx;
    for (int i = 0; i < q; ++i, ++t) {
      const int p = ctx - q + i;
      md.slot_mapping.data_as<int>()[t] = row[p / kBlock] * kBlock + p % kBlock;
    }
  }
  md.query_start_loc.data_as<int>()[R] = T;
  Tensor q = f32({T, kHq * kD}), k = f32({T, kHkv * kD}), v = f32({T, kHkv * kD});
  fill(q), fill(k), fill(v);
  Tensor plain = f32({T, kHq * kD}), cascade = f32({T, kHq * kD});
  attn->plan_eager(md, 12);
  md.cascade_prefix_len = 0;
  attn->forward(q, k, v, cache, md, plain);
  md.cascade_prefix_len = P;
  attn->forward(q, k, v, cache, md, cascade);
  be->stream().synchronize();
  double worst = 0;
  for (int64_t i = 0; i < plain.numel(); ++i)
    worst = std::max(worst, double(std::abs(plain.data_as<float>()[i] - cascade.data_as<float>()[i])));
  EXPECT_LT(worst, 1e-5) << "prefix " << P;
}

INSTANTIATE_TEST_SUITE_P(PrefixLengths, CascadeAttention, ::testing::Values(4, 16, 52, 256));

TEST(CascadePrefix, SharedLeadingBlocksBeforeEveryQuery) {
  // Three requests of width 5: blocks 7, 8 shared, then 9 by two of them.
  const std::vector<int32_t> table = {7, 8, 9, 1, 0, 7, 8, 9, 2, 0, 7, 8, 3, 4, 0};
  const std::vector<int32_t> seq_lens = {17, 20, 16}, qsl = {0, 1, 2, 3};
  EXPECT_EQ(common_prefix_len(table, 5, seq_lens, qsl, 3, 4), 8);
  EXPECT_EQ(common_prefix_len(table, 5, seq_lens, qsl, 2, 4), 12);  // the first two share 3 blocks
  // A request whose queries start inside the shared blocks caps the prefix at its computed tokens.
  const std::vector<int32_t> late = {0, 1, 2, 12};  // request 2: 9 queries, 7 computed
  EXPECT_EQ(common_prefix_len(table, 5, seq_lens, late, 3, 4), 4);
  EXPECT_EQ(common_prefix_len(table, 5, seq_lens, qsl, 1, 4), 0);  // one request: nothing to share
}

TEST(CascadeHeuristic, VllmThresholdsAndDecodeModel) {
  auto decode = [](int n) {
    std::vector<int32_t> qsl(size_t(n) + 1);
    for (int i = 0; i <= n; ++i) qsl[size_t(i)] = i;
    return qsl;
  };
  const CascadeHeuristic cpu{}, h100{.num_sms = 132};
  EXPECT_FALSE(use_cascade_attention(240, decode(64), 64, 32, 8, cpu));  // prefix too short
  EXPECT_FALSE(use_cascade_attention(4096, decode(7), 7, 32, 8, cpu));   // too few requests
  EXPECT_TRUE(use_cascade_attention(4096, decode(64), 64, 32, 8, cpu));
  std::vector<int32_t> mixed = decode(8);
  for (size_t i = 1; i < mixed.size(); ++i) mixed[i] += 5;         // every request 6 tokens but the first
  EXPECT_TRUE(use_cascade_attention(256, mixed, 8, 32, 8, h100));  // not pure decode: always
  // Llama-3.1-8B shapes on 132 SMs: 64 decode requests over a 4k prefix: 1 wave x 32 tiles for
  // cascade against 64 x 8 x 32 CTAs / 132 = 125 waves of flash-decoding.
  EXPECT_TRUE(use_cascade_attention(4096, decode(64), 64, 32, 8, h100));
  // Multi-head attention (group 1) decodes without flash-decoding's grouping: cascade.
  EXPECT_TRUE(use_cascade_attention(4096, decode(8), 8, 32, 32, h100));
  // A backend whose cascade launches take at most 64 tokens: 65 decode requests do not cascade.
  const CascadeHeuristic capped{.num_sms = 132, .max_tokens = 64};
  EXPECT_TRUE(use_cascade_attention(4096, decode(64), 64, 32, 8, capped));
  EXPECT_FALSE(use_cascade_attention(4096, decode(65), 65, 32, 8, capped));
}

TEST(CascadeMerge, TwoRangesMergeAsOne) {
  const float acc_a[2] = {1.0f, 2.0f}, acc_b[2] = {3.0f, -1.0f};
  float out[2];
  merge_partials({0.5f, 2.0f}, acc_a, {1.5f, 1.0f}, acc_b, 2, out);
  const float wa = std::exp(0.5f - 1.5f);
  EXPECT_NEAR(out[0], (1.0f * wa + 3.0f) / (2.0f * wa + 1.0f), 1e-6);
  EXPECT_NEAR(out[1], (2.0f * wa - 1.0f) / (2.0f * wa + 1.0f), 1e-6);
}

}  // namespace
}  // namespace gs
