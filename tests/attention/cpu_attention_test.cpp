// CPU paged attention against dense causal attention: mixed prefill/decode/chunked batches,
// GQA, scattered blocks, padded requests and tokens, and graph replay on new metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/attention_backend.h"
#include "core/error.h"

namespace gs {
namespace {

constexpr int kHq = 4, kHkv = 2, kD = 8, kBlock = 4, kBlocks = 40, kMaxBlocks = 8;

struct Req {
  int ctx;    // tokens in context after the step
  int q_len;  // new tokens this step
};

class PagedAttention : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
  std::unique_ptr<AttentionBackend> attn = make_cpu_attention(*be, {kHq, kHkv, kD, 1.0f / std::sqrt(float(kD))});
  std::mt19937 rng{7};
  KVCacheLayer cache{f32({kBlocks, kBlock, kHkv, kD}), f32({kBlocks, kBlock, kHkv, kD})};
  AttentionMetadata md;
  int max_reqs = 6, max_tokens = 40;

  PagedAttention() {
    zero_cache();
    md.query_start_loc = i32({max_reqs + 1});
    md.seq_lens = i32({max_reqs});
    md.block_table = i32({max_reqs, kMaxBlocks});
    md.slot_mapping = i32({max_tokens});
    md.block_size = kBlock, md.max_blocks_per_req = kMaxBlocks;
  }

  // The cache's unwritten slots hold zeros, never check()'s sentinel (an uninitialized e4m3 byte
  // would match it one time in 256).
  void zero_cache() {
    be->fill_zero(cache.k);
    be->fill_zero(cache.v);
    be->stream().synchronize();
  }
  Tensor f32(const Shape& s) { return Tensor::empty(s, DType::F32, be->allocator()); }
  Tensor i32(const Shape& s) { return Tensor::empty(s, DType::I32, be->allocator()); }
  float randn() { return std::normal_distribution<float>(0, 1)(rng); }

  // Dense K/V (per request: [ctx][Hkv*D]) and q of the new tokens.
  struct Batch {
    std::vector<Req> reqs;
    std::vector<std::vector<float>> k, v, q;
    std::vector<std::vector<int>> blocks;
    int tokens = 0, padded_tokens = 0, padded_reqs = 0;
  };

  // Fills the cache with each request's old tokens and the metadata and q/k/v for the new ones.
  Batch make_batch(std::vector<Req> reqs, int pad_reqs, int pad_tokens, Tensor& q, Tensor& k, Tensor& v) {
    Batch b;
    b.reqs = reqs;
    std::vector<int> free(kBlocks);
    std::iota(free.begin(), free.end(), 0);
    std::shuffle(free.begin(), free.end(), rng);  // block tables are never contiguous
    int t = 0;
    const int kvw = kHkv * kD;
    for (size_t r = 0; r < reqs.size(); ++r) {
      const Req& rq = reqs[r];
      b.k.emplace_back(size_t(rq.ctx * kvw)), b.v.emplace_back(size_t(rq.ctx * kvw));
      for (auto& x : b.k.back()) x = on_cache_grid(randn(), cache.k_scale);
      for (auto& x : b.v.back()) x = on_cache_grid(randn(), cache.v_scale);
      b.blocks.emplace_back();
      for (int i = 0; i < (rq.ctx + kBlock - 1) / kBlock; ++i) b.blocks.back().push_back(free.back()), free.pop_back();
      for (int i = 0; i < kMaxBlocks; ++i)
        md.block_table.data_as<int>()[r * kMaxBlocks + i] = i < int(b.blocks[r].size()) ? b.blocks[r][size_t(i)] : -1;
      md.query_start_loc.data_as<int>()[r] = t;
      md.seq_lens.data_as<int>()[r] = rq.ctx;
      b.q.emplace_back(size_t(rq.q_len * kHq * kD));
      for (auto& x : b.q.back()) x = randn();
      for (int p = 0; p < rq.ctx; ++p) {
        const int slot = b.blocks[r][size_t(p / kBlock)] * kBlock + p % kBlock;
        const int i = p - (rq.ctx - rq.q_len);  // index among the new tokens, < 0 if cached
        if (i < 0) {
          to_cache(cache.k, slot, &b.k[r][size_t(p * kvw)], cache.k_scale);
          to_cache(cache.v, slot, &b.v[r][size_t(p * kvw)], cache.v_scale);
          continue;
        }
        std::copy_n(&b.q[r][size_t(i * kHq * kD)], kHq * kD, q.data_as<float>() + (t + i) * kHq * kD);
        std::copy_n(&b.k[r][size_t(p * kvw)], kvw, k.data_as<float>() + (t + i) * kvw);
        std::copy_n(&b.v[r][size_t(p * kvw)], kvw, v.data_as<float>() + (t + i) * kvw);
        md.slot_mapping.data_as<int>()[t + i] = slot;
      }
      t += rq.q_len;
    }
    b.tokens = t, b.padded_tokens = t + pad_tokens, b.padded_reqs = int(reqs.size()) + pad_reqs;
    for (int r = int(reqs.size()); r < b.padded_reqs; ++r) {
      md.query_start_loc.data_as<int>()[r] = t;
      md.seq_lens.data_as<int>()[r] = 0;
    }
    md.query_start_loc.data_as<int>()[b.padded_reqs] = t;
    for (int i = t; i < b.padded_tokens; ++i) {
      md.slot_mapping.data_as<int>()[i] = -1;
      for (int j = 0; j < kvw; ++j) k.data_as<float>()[i * kvw + j] = 99.0f;  // must never reach the cache
    }
    md.num_reqs = int(reqs.size()), md.num_reqs_padded = b.padded_reqs;
    md.max_query_len = 0;
    for (auto& rq : reqs) md.max_query_len = std::max(md.max_query_len, rq.q_len);
    return b;
  }

  // An e4m3 cache (attention/kv_cache.h) holds x as e4m3(x / scale): the dense values are put on
  // that grid first, so the reference attends to exactly what the cache returns.
  float on_cache_grid(float x, float scale) const {
    return cache.fp8() ? f8e4m3_to_f32(f32_to_f8e4m3(x * (1.0f / scale))) * scale : x;
  }
  void to_cache(const Tensor& plane, int slot, const float* row, float scale) const {
    const int kvw = kHkv * kD;
    for (int j = 0; j < kvw; ++j) {
      if (plane.dtype() == DType::F8E4M3)
        plane.data_as<uint8_t>()[slot * kvw + j] = f32_to_f8e4m3(row[j] * (1.0f / scale));
      else
        plane.data_as<float>()[slot * kvw + j] = row[j];
    }
  }

  // Dense causal GQA attention of request r's new queries.
  static std::vector<float> reference(const Batch& b, size_t r) {
    const Req& rq = b.reqs[r];
    std::vector<float> out(size_t(rq.q_len * kHq * kD));
    for (int i = 0; i < rq.q_len; ++i)
      for (int h = 0; h < kHq; ++h) {
        const int kvh = h / (kHq / kHkv), last = rq.ctx - rq.q_len + i;
        std::vector<double> s(size_t(last + 1));
        for (int p = 0; p <= last; ++p) {
          double d = 0;
          for (int j = 0; j < kD; ++j)
            d += double(b.q[r][size_t((i * kHq + h) * kD + j)]) * b.k[r][size_t((p * kHkv + kvh) * kD + j)];
          s[size_t(p)] = d / std::sqrt(double(kD));
        }
        const double m = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (auto& x : s) z += (x = std::exp(x - m));
        for (int j = 0; j < kD; ++j) {
          double o = 0;
          for (int p = 0; p <= last; ++p) o += s[size_t(p)] / z * b.v[r][size_t((p * kHkv + kvh) * kD + j)];
          out[size_t((i * kHq + h) * kD + j)] = float(o);
        }
      }
    return out;
  }

  void check(const Batch& b, const Tensor& out) {
    int t = 0;
    for (size_t r = 0; r < b.reqs.size(); ++r) {
      const auto want = reference(b, r);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(out.data_as<float>()[t * kHq * kD + int(i)], want[i], 1e-4) << "request " << r << " elem " << i;
      t += b.reqs[r].q_len;
    }
    for (int i = t * kHq * kD; i < b.padded_tokens * kHq * kD; ++i) ASSERT_EQ(out.data_as<float>()[i], 0.0f);
    // New K/V landed at their slots; padded tokens wrote nothing.
    for (int64_t i = 0; i < cache.k.numel(); ++i)
      ASSERT_NE(
          cache.fp8() ? f8e4m3_to_f32(cache.k.data_as<uint8_t>()[i]) * cache.k_scale : cache.k.data_as<float>()[i],
          on_cache_grid(99.0f, cache.k_scale));
  }
};

TEST_F(PagedAttention, MixedBatchWithPaddingMatchesDenseReference) {
  Tensor q = f32({max_tokens, kHq * kD}), k = f32({max_tokens, kHkv * kD}), v = f32({max_tokens, kHkv * kD});
  Tensor out = f32({max_tokens, kHq * kD});
  std::fill_n(out.data_as<float>(), out.numel(), 7.0f);
  // prefill, decode, chunked prefill continuing a cached prefix, decode at a block boundary
  const Batch b = make_batch({{7, 7}, {10, 1}, {12, 3}, {9, 1}}, /*pad_reqs=*/2, /*pad_tokens=*/3, q, k, v);
  const int T = b.padded_tokens;
  attn->forward(q.rows(0, T), k.rows(0, T), v.rows(0, T), cache, md, out.rows(0, T));
  check(b, out);
}

// --kv-cache-dtype fp8: the new tokens' k, v are written as e4m3 with the layer's scales and every
// position is read back through them; on values already on the e4m3 grid the result is the dense
// reference's, and each new row's bytes are the quantized k.
TEST_F(PagedAttention, Fp8CacheQuantizesTheNewRowsAndAttendsToTheCachesValues) {
  const Shape cs{kBlocks, kBlock, kHkv, kD};
  cache = KVCacheLayer{Tensor::empty(cs, DType::F8E4M3, be->allocator()),
                       Tensor::empty(cs, DType::F8E4M3, be->allocator()), 0.37f, 1.9f};
  zero_cache();
  ASSERT_TRUE(cache.fp8());
  Tensor q = f32({max_tokens, kHq * kD}), k = f32({max_tokens, kHkv * kD}), v = f32({max_tokens, kHkv * kD});
  Tensor out = f32({max_tokens, kHq * kD});
  const Batch b = make_batch({{7, 7}, {10, 1}, {12, 3}, {9, 1}}, 2, 3, q, k, v);
  const int T = b.padded_tokens;
  attn->forward(q.rows(0, T), k.rows(0, T), v.rows(0, T), cache, md, out.rows(0, T));
  check(b, out);
  for (int t = 0; t < b.tokens; ++t) {
    const int slot = md.slot_mapping.data_as<int>()[t];
    for (int j = 0; j < kHkv * kD; ++j)
      ASSERT_EQ(cache.k.data_as<uint8_t>()[slot * kHkv * kD + j],
                f32_to_f8e4m3(k.data_as<float>()[t * kHkv * kD + j] * (1.0f / cache.k_scale)))
          << "token " << t << " element " << j;
  }
}

TEST_F(PagedAttention, RequestsWithNoQueriesDoNothing) {
  Tensor q = f32({max_tokens, kHq * kD}), k = f32({max_tokens, kHkv * kD}), v = f32({max_tokens, kHkv * kD});
  Tensor out = f32({max_tokens, kHq * kD});
  const Batch b = make_batch({{5, 2}, {6, 0}, {3, 3}}, 0, 0, q, k, v);
  const int T = b.padded_tokens;
  attn->forward(q.rows(0, T), k.rows(0, T), v.rows(0, T), cache, md, out.rows(0, T));
  check(b, out);
}

// One recorded closure serves every batch of the same padded shape: it must read the
// metadata buffers at replay time.
TEST_F(PagedAttention, CapturedForwardReadsMetadataAtReplay) {
  Tensor q = f32({max_tokens, kHq * kD}), k = f32({max_tokens, kHkv * kD}), v = f32({max_tokens, kHkv * kD});
  Tensor out = f32({max_tokens, kHq * kD});
  const int T = 8;
  make_batch({{3, 3}, {9, 1}}, 2, 4, q, k, v);  // the graph covers 4 request rows, 8 tokens
  be->stream().begin_capture();
  attn->forward(q.rows(0, T), k.rows(0, T), v.rows(0, T), cache, md, out.rows(0, T));
  auto graph = be->stream().end_capture();
  // A different batch of the same padded size: three decodes and a 2-token chunk.
  const Batch b = make_batch({{11, 1}, {4, 1}, {16, 1}, {6, 2}}, 0, 3, q, k, v);
  ASSERT_EQ(b.padded_tokens, T);
  ASSERT_EQ(b.padded_reqs, 4);
  graph->replay();
  check(b, out);
}

TEST_F(PagedAttention, BadMetadataIsAnErrorNotACrash) {
  Tensor q = f32({max_tokens, kHq * kD}), k = f32({max_tokens, kHkv * kD}), v = f32({max_tokens, kHkv * kD});
  Tensor out = f32({max_tokens, kHq * kD});
  make_batch({{5, 2}}, 0, 0, q, k, v);
  md.block_table.data_as<int>()[1] = kBlocks + 3;
  EXPECT_THROW(attn->forward(q.rows(0, 2), k.rows(0, 2), v.rows(0, 2), cache, md, out.rows(0, 2)), Error);
  EXPECT_THROW(make_cpu_attention(*be, {6, 4, 8, 1.0f}), Error);  // heads not a multiple of kv heads
  EXPECT_EQ(attn->cudagraph_support(), AttentionCGSupport::ALWAYS);
  EXPECT_EQ(make_cpu_attention(*be, {4, 2, 8, 1.0f}, AttentionCGSupport::NEVER)->cudagraph_support(),
            AttentionCGSupport::NEVER);
  EXPECT_EQ(cg_support_name(AttentionCGSupport::UNIFORM_BATCH), "UNIFORM_BATCH");
}

// A FULL graph is planned from its shape alone: the same launch fields whatever batch it carries; an eager step
// from its batch.
TEST_F(PagedAttention, GraphsArePlannedFromTheirShapeEagerStepsFromTheBatch) {
  for (int reqs : {1, 3}) {
    md.num_reqs = reqs;
    attn->plan_graph(md, {.num_tokens = 16, .request_rows = 8});
    EXPECT_EQ(md.num_reqs_padded, 8);
    EXPECT_EQ(md.max_query_len, 16);  // a mixed graph may carry one 16-token prefill
    attn->plan_graph(md, {.num_tokens = 12, .request_rows = 4, .uniform_query_len = 3});
    EXPECT_EQ(md.num_reqs_padded, 4);
    EXPECT_EQ(md.max_query_len, 3);
    attn->plan_eager(md, 5);
    EXPECT_EQ(md.num_reqs_padded, reqs);
    EXPECT_EQ(md.max_query_len, 5);
  }
  md.num_reqs = 9;
  EXPECT_THROW(attn->plan_graph(md, {.num_tokens = 16, .request_rows = 8}), Error);  // more requests than rows
}

}  // namespace
}  // namespace gs
