// Cascade attention on the CUDA backend (attention/cuda/cascade_attention.h): a batch whose requests
// share their first P context tokens, run through the backend with md.cascade_prefix_len = P, gives
// the output of the same batch without cascade (bf16 tolerance, every token's rows), the same cache
// writes and zero rows for padded tokens: decode batches of 8 to 64 requests, verification and
// chunked-prefill requests in one batch, prefixes of 256 to 4096 tokens (not all whole 64-key
// tiles), block sizes 16 and 32, head dims 64 and 128, GQA 1, 4 and 8, padded requests and tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/attention_backend.h"
#include "attention/cuda/cascade_attention.h"
#include "attention/cuda/cuda_attention.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
#include "paged_batch.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h, paged_batch.h

using Req = PagedReq;  // ctx - q_len >= the prefix
struct Case {
  int hq, hkv, D, block_size, prefix;
  std::vector<Req> reqs;
  int pad_reqs = 0, pad_tokens = 0;
};

// The batch on the host: the first prefix / block_size block-table columns are the same blocks
// for every request, the rest its own.
struct HostBatch : PagedBatch {
  int max_q = 0;
};

HostBatch make_batch(const Case& c, uint32_t seed) {
  HostBatch h{
      make_paged_batch(c.hq, c.hkv, c.D, c.block_size, c.reqs, c.pad_reqs, c.pad_tokens, c.prefix / c.block_size, seed),
      0};
  for (const Req& r : c.reqs) h.max_q = std::max(h.max_q, r.q_len);
  return h;
}

struct Result {
  std::vector<float> out, kc, vc;
};

class CascadeAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    GS_REQUIRE_GPU();
    gpu = make_cuda_backend(0, DType::BF16);
  }

  // The batch through the backend's forward, with md.cascade_prefix_len = prefix (0: plain), on a
  // poisoned output.
  Result run(AttentionBackend& attn, const Case& c, const HostBatch& h, int prefix) {
    const int64_t row = int64_t(c.hkv) * c.D;
    KVCacheLayer cache{on(*gpu, h.kc, {h.num_blocks, c.block_size, c.hkv, c.D}, DType::BF16), Tensor()};
    cache.v = on(*gpu, h.vc, cache.k.shape(), DType::BF16);
    AttentionMetadata md;
    md.query_start_loc = on_i32(*gpu, h.qsl, {int64_t(h.qsl.size())});
    md.seq_lens = on_i32(*gpu, h.seq_lens, {int64_t(h.seq_lens.size())});
    md.block_table = on_i32(*gpu, h.bt, {h.nrp, h.max_blocks});
    md.slot_mapping = on_i32(*gpu, h.slots, {h.T});
    md.num_reqs = int(c.reqs.size());
    md.block_size = c.block_size, md.max_blocks_per_req = h.max_blocks;
    attn.plan_eager(md, h.max_q);
    md.cascade_prefix_len = prefix;
    const Tensor out = on(*gpu, randn(h.q.size(), 77), {h.T, int64_t(c.hq) * c.D}, DType::BF16);
    const Tensor q = on(*gpu, h.q, out.shape(), DType::BF16), k = on(*gpu, h.k, {h.T, row}, DType::BF16),
                 v = on(*gpu, h.v, {h.T, row}, DType::BF16);
    attn.forward(q, k, v, cache, md, out);
    return {read(*gpu, out), read(*gpu, cache.k), read(*gpu, cache.v)};
  }

  // Cascade against plain attention on one case: every token's rows within bf16 tolerance, the
  // same cache, zeros for padded tokens.
  void check(const Case& c, uint32_t seed, const AttentionKernelOptions& o = {}) {
    auto attn = make_cuda_attention(*gpu, AttentionShape{c.hq, c.hkv, c.D, 0.0f}, o);
    ASSERT_TRUE(attn->supports_cascade());
    attn->prepare_cascade();
    const HostBatch h = make_batch(c, seed);
    const Result plain = run(*attn, c, h, 0), cascade = run(*attn, c, h, c.prefix);
    const size_t row = size_t(c.hq) * c.D;
    const int actual = h.qsl.back();
    for (int t = 0; t < actual; ++t) {
      const std::vector<float> got(cascade.out.begin() + t * row, cascade.out.begin() + (t + 1) * row),
          want(plain.out.begin() + t * row, plain.out.begin() + (t + 1) * row);
      ASSERT_LT(rel_l2(got, want), 1e-2) << "token " << t;
    }
    for (size_t i = size_t(actual) * row; i < cascade.out.size(); ++i) ASSERT_EQ(cascade.out[i], 0.0f) << i;
    EXPECT_TRUE(cascade.kc == plain.kc) << "k cache differs";
    EXPECT_TRUE(cascade.vc == plain.vc) << "v cache differs";
  }

  std::unique_ptr<Backend> gpu;
};

// n decode requests (one new token each) past a prefix of p tokens, own contexts of 1 to ~300.
std::vector<Req> decode_batch(int n, int p) {
  std::vector<Req> reqs;
  for (int i = 0; i < n; ++i) reqs.push_back({1, p + 1 + (i * 97) % 300});
  return reqs;
}

TEST_F(CascadeAttention, DecodeBatchEqualsPlainAttention) {
  uint32_t seed = 100;
  for (auto [hq, hkv, D] : {std::tuple{32, 8, 128}, {32, 8, 64}, {8, 8, 64}, {64, 8, 128}, {12, 2, 128}})
    for (auto [n, p] : {std::pair{64, 4096}, {8, 256}, {24, 1040}, {40, 2000}}) {
      SCOPED_TRACE(testing::Message() << "hq " << hq << " hkv " << hkv << " D " << D << " reqs " << n << " prefix "
                                      << p);
      check(Case{hq, hkv, D, 16, p, decode_batch(n, p), 2, 3}, seed++);
    }
}

// Chunked prefills, verification (4 tokens) and decodes in one batch; block size 32; a request
// whose own part is only its new tokens.
TEST_F(CascadeAttention, MixedBatchEqualsPlainAttention) {
  uint32_t seed = 200;
  for (int bs : {16, 32})
    for (auto [hq, hkv, D] : {std::tuple{32, 8, 128}, {32, 8, 64}, {16, 16, 64}}) {
      SCOPED_TRACE(testing::Message() << "block " << bs << " hq " << hq << " hkv " << hkv << " D " << D);
      const int p = 1024;
      check(Case{hq, hkv, D, bs, p, {{100, p + 100}, {1, p + 700}, {4, p + 40}, {37, p + 300}, {1, p + 1}}, 1, 5},
            seed++);
      check(Case{hq, hkv, D, bs, 320, {{200, 900}, {1, 321}, {64, 500}, {3, 1000}}, 0, 0}, seed++);
    }
}

// The D 64 prefix pass on mma.sync (one and two m16 tiles a warp) as well as wgmma; the prefix
// unsplit (a split target of one CTA) and split into tiles of one 64-key tile each.
TEST_F(CascadeAttention, KernelVariantsEqualPlainAttention) {
  uint32_t seed = 300;
  for (int variant = 0; variant < 4; ++variant) {
    AttentionKernelOptions o;
    o.prefill_wgmma = variant != 1 && variant != 2;
    o.prefill_tiles_per_warp_d64 = variant == 1 ? 1 : 2;
    if (variant == 3) o.cascade_split_target = 1;
    if (variant == 0) o.cascade_split_min_tiles = 1, o.cascade_split_target = 100000;
    SCOPED_TRACE(testing::Message() << "variant " << variant);
    check(Case{32, 8, 64, 16, 2048, decode_batch(48, 2048), 1, 2}, seed++, o);
    check(Case{32, 8, 128, 16, 1024, decode_batch(16, 1024), 0, 0}, seed++, o);
  }
}

// As many q rows as a cascade launch takes (kCascadeMaxTokens): the fewest workspace slots.
TEST_F(CascadeAttention, LargestBatchEqualsPlainAttention) {
  std::vector<Req> reqs = decode_batch(cuda::kCascadeMaxTokens - 100, 512);
  reqs.push_back({100, 700});
  check(Case{32, 8, 128, 16, 512, reqs, 0, 0}, 400);
}

}  // namespace
}  // namespace gs
