// The CUDA paged attention against the CPU reference: mixed prefill + decode batches, GQA,
// several blocks per request, padded requests and tokens, and a captured graph replayed on a
// different batch of the same padded shape; attention sinks (gpt-oss).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "attention/attention_backend.h"
#include "attention/cuda/cuda_attention.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h

constexpr int kBlockSize = 16, kBlocks = 96, kMaxBlocksPerReq = 10, kMaxReqs = 8, kMaxTokens = 64;

// One batch: per request its new query count and context length after the step.
struct Batch {
  std::vector<int> q_len, ctx;
  int num_reqs_padded, num_tokens;
};

// Host arrays of a batch's metadata (blocks of request r: a fixed shuffled assignment).
struct HostMetadata {
  std::vector<int32_t> qsl, seq_lens, block_table, slots;
  int num_actual = 0;
  explicit HostMetadata(const Batch& b) {
    std::vector<int32_t> perm(kBlocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(7);
    std::shuffle(perm.begin(), perm.end(), rng);
    qsl.assign(kMaxReqs + 1, 0);
    seq_lens.assign(kMaxReqs, 0);
    block_table.assign(kMaxReqs * kMaxBlocksPerReq, 0);
    slots.assign(kMaxTokens, -1);
    const int n = int(b.q_len.size());
    for (int r = 0; r < kMaxReqs; ++r) {
      for (int j = 0; j < kMaxBlocksPerReq; ++j)  // disjoint blocks, in shuffled order
        block_table[r * kMaxBlocksPerReq + j] = perm[size_t(r * kMaxBlocksPerReq + j) % kBlocks];
      const int q = r < n ? b.q_len[r] : 0;
      if (r < n) seq_lens[r] = b.ctx[r];
      for (int i = 0; i < q; ++i) {
        const int p = b.ctx[r] - q + i;
        slots[num_actual + i] = block_table[r * kMaxBlocksPerReq + p / kBlockSize] * kBlockSize + p % kBlockSize;
      }
      num_actual += q;
      qsl[r + 1] = num_actual;
    }
  }
};

// Persistent metadata buffers on one backend.
struct Metadata {
  AttentionMetadata md;
  Metadata(Backend& b) {
    md.query_start_loc = Tensor::empty({kMaxReqs + 1}, DType::I32, b.allocator());
    md.seq_lens = Tensor::empty({kMaxReqs}, DType::I32, b.allocator());
    md.block_table = Tensor::empty({kMaxReqs, kMaxBlocksPerReq}, DType::I32, b.allocator());
    md.slot_mapping = Tensor::empty({kMaxTokens}, DType::I32, b.allocator());
    md.block_size = kBlockSize;
    md.max_blocks_per_req = kMaxBlocksPerReq;
  }
  void fill(Backend& b, const Batch& batch) {
    HostMetadata h(batch);
    auto put = [&](const Tensor& dst, std::vector<int32_t>& v) {
      b.copy(dst, Tensor::wrap(v.data(), dst.shape(), DType::I32, Device::cpu()));
    };
    put(md.query_start_loc, h.qsl);
    put(md.seq_lens, h.seq_lens);
    put(md.block_table, h.block_table);
    put(md.slot_mapping, h.slots);
    b.stream().synchronize();
    md.num_reqs = int(batch.q_len.size());
    md.num_reqs_padded = batch.num_reqs_padded;
    md.max_query_len = *std::max_element(batch.q_len.begin(), batch.q_len.end());
  }
};

struct Side {  // one backend's tensors for one attention layer
  std::unique_ptr<AttentionBackend> attn;
  KVCacheLayer cache;
  Tensor q, k, v, out;
  std::unique_ptr<Metadata> meta;
};

class CudaAttentionTest : public ::testing::TestWithParam<std::tuple<AttentionShape, DType>> {
 protected:
  void SetUp() override {
    GS_REQUIRE_GPU();
    const DType gdt = std::get<1>(GetParam());
    tol = gdt == DType::F32 ? 1e-4 : 1e-2;
    gpu = make_cuda_backend(0, gdt);
    cpu = make_cpu_backend();
    const AttentionShape s = std::get<0>(GetParam());
    g.attn = make_cuda_attention(*gpu, s);
    c.attn = make_cpu_attention(*cpu, s);
    EXPECT_EQ(g.attn->cudagraph_support(), AttentionCGSupport::ALWAYS);
    for (auto [side, b, dt] : {std::tuple{&g, gpu.get(), gdt}, {&c, cpu.get(), DType::F32}}) {
      const Shape cs{kBlocks, kBlockSize, s.num_kv_heads, s.head_dim};
      side->cache.k = Tensor::empty(cs, dt, b->allocator());
      side->cache.v = Tensor::empty(cs, dt, b->allocator());
      side->q = Tensor::empty({kMaxTokens, s.num_heads * s.head_dim}, dt, b->allocator());
      side->k = Tensor::empty({kMaxTokens, s.num_kv_heads * s.head_dim}, dt, b->allocator());
      side->v = Tensor::empty(side->k.shape(), dt, b->allocator());
      side->out = Tensor::empty(side->q.shape(), dt, b->allocator());
      side->meta = std::make_unique<Metadata>(*b);
    }
  }

  // Fresh random cache, q, k, v on both sides, the batch's metadata, poisoned GPU output.
  void load(const Batch& batch, uint32_t seed) {
    uint32_t sd = seed;
    auto fill = [&](auto pick) {
      const Tensor& shape_of = pick(c);
      const auto v = randn(size_t(shape_of.numel()), sd++);
      for (auto [side, b] : {std::pair{&g, gpu.get()}, {&c, cpu.get()}}) {
        const Tensor& dst = pick(*side);
        if (dst.dtype() != DType::F8E4M3) {
          b->copy(dst, on(*b, v, dst.shape(), dst.dtype()));
          continue;
        }
        std::vector<uint8_t> bytes(v.size());  // an e4m3 cache's earlier rows: any codes
        for (size_t i = 0; i < v.size(); ++i) bytes[i] = f32_to_f8e4m3(v[i]);
        b->copy(dst, Tensor::wrap(bytes.data(), dst.shape(), DType::F8E4M3, Device::cpu()));
        b->stream().synchronize();  // bytes is freed at the end of this iteration
      }
    };
    fill([](Side& s) -> Tensor& { return s.cache.k; });
    fill([](Side& s) -> Tensor& { return s.cache.v; });
    fill([](Side& s) -> Tensor& { return s.q; });
    fill([](Side& s) -> Tensor& { return s.k; });
    fill([](Side& s) -> Tensor& { return s.v; });
    fill([](Side& s) -> Tensor& { return s.out; });  // poison: padded rows must become zeros
    g.meta->fill(*gpu, batch);
    c.meta->fill(*cpu, batch);
  }

  void run(Side& s, const Batch& batch, const Tensor& sinks = Tensor(), int window = -1) {
    const int T = batch.num_tokens;
    s.attn->forward_with_sinks(s.q.rows(0, T), s.k.rows(0, T), s.v.rows(0, T), s.cache, s.meta->md, s.out.rows(0, T),
                               window, sinks);
  }

  void expect_equal_to_cpu(const Batch& batch, int num_actual) {
    const int T = batch.num_tokens;
    const auto go = read(*gpu, g.out.rows(0, T)), co = read(*cpu, c.out.rows(0, T));
    EXPECT_LT(rel_l2(go, co), tol);
    const int64_t row = g.out.row_elems();
    for (int64_t i = int64_t(num_actual) * row; i < int64_t(T) * row; ++i) ASSERT_EQ(go[size_t(i)], 0.0f) << i;
    if (g.cache.fp8()) {  // both quantize the same bf16-exact rows with the same scales
      EXPECT_EQ(read(*gpu, g.cache.k), read(*cpu, c.cache.k));
      EXPECT_EQ(read(*gpu, g.cache.v), read(*cpu, c.cache.v));
      return;
    }
    EXPECT_LT(rel_l2(read(*gpu, g.cache.k), read(*cpu, c.cache.k)), tol);
    EXPECT_LT(rel_l2(read(*gpu, g.cache.v), read(*cpu, c.cache.v)), tol);
  }

  // A single-token decode graph captured at a 40-token context, replayed at 160, 1 and 97 tokens.
  void single_decode_graph_replays(uint32_t seed) {
    const Batch captured{{1}, {40}, 1, 1};
    load(captured, seed);
    seed += 100;       // each load draws six seeds from its own
    run(g, captured);  // eager warm-up
    gpu->stream().begin_capture();
    run(g, captured);
    auto graph = gpu->stream().end_capture();
    for (const Batch& other : {Batch{{1}, {160}, 1, 1}, Batch{{1}, {1}, 1, 1}, Batch{{1}, {97}, 1, 1}}) {
      SCOPED_TRACE(other.ctx[0]);
      load(other, seed++);
      graph->replay();
      run(c, other);
      expect_equal_to_cpu(other, actual(other));
    }
  }

  static int actual(const Batch& b) { return std::accumulate(b.q_len.begin(), b.q_len.end(), 0); }

  std::unique_ptr<Backend> gpu, cpu;
  Side g, c;
  double tol = 1e-2;
};

// Fresh prefill, decode, chunked prefill, decode at a block edge; two padded requests; padded tokens.
const Batch kMixed{{20, 1, 13, 1, 8}, {20, 50, 77, 33, 40}, 7, 48};
// Speculative-decode verification: every request has q = 3.
const Batch kUniform{{3, 3, 3}, {9, 70, 150}, 4, 12};

TEST_P(CudaAttentionTest, MixedBatchMatchesCpu) {
  const Batch b = kMixed;
  load(b, 100);
  run(g, b);
  run(c, b);
  expect_equal_to_cpu(b, actual(b));
}

TEST_P(CudaAttentionTest, UniformDecodeMatchesCpu) {
  load(kUniform, 200);
  run(g, kUniform);
  run(c, kUniform);
  expect_equal_to_cpu(kUniform, actual(kUniform));
}

// Captured on the mixed batch; replayed on a decode batch written into the same buffers.
TEST_P(CudaAttentionTest, GraphReplayOnAnotherBatchMatchesCpu) {
  const Batch captured = kMixed;
  load(captured, 300);
  run(g, captured);  // eager warm-up
  gpu->stream().begin_capture();
  run(g, captured);
  auto graph = gpu->stream().end_capture();

  Batch other{{1, 1, 1, 2, 30}, {120, 2, 64, 17, 30}, captured.num_reqs_padded, captured.num_tokens};
  load(other, 400);
  graph->replay();
  run(c, other);
  expect_equal_to_cpu(other, actual(other));
}

// Decode at batch 1 splits each context over several CTAs (flash-decoding); one graph captured
// at a short context replays at longer ones (more splits busy) and at a single key.
TEST_P(CudaAttentionTest, SingleDecodeGraphReplaysAtOtherContextLengths) { single_decode_graph_replays(500); }

// Attention sinks (gpt-oss): batches with long queries (the mixed one) run the tensor-core prefill
// kernel, which adds them to its normalisation; decode batches route to flash-decoding, which adds
// them to its final normalisation (one CTA a context) or to its split merge (batch 1: the context
// split over CTAs); with and without a sliding window.
TEST_P(CudaAttentionTest, SinksMatchCpu) {
  const int hq = std::get<0>(GetParam()).num_heads;
  std::vector<float> sv(static_cast<size_t>(hq));
  for (int h = 0; h < hq; ++h) sv[size_t(h)] = float(h % 5) - 1.0f;  // from e^-1 to e^3 beside the keys
  const Tensor gs = on(*gpu, sv, {hq}, DType::F32), cs = on(*cpu, sv, {hq}, DType::F32);
  uint32_t seed = 700;
  for (const Batch& b : {kMixed, kUniform, Batch{{1}, {160}, 1, 1}})
    for (int window : {-1, 24}) {
      SCOPED_TRACE(testing::Message() << "requests " << b.q_len.size() << " window " << window);
      load(b, seed++);
      run(g, b, gs, window);
      run(c, b, cs, window);
      expect_equal_to_cpu(b, actual(b));
    }
}

// --kv-cache-dtype fp8 (attention/kv_cache.h) on the tensor-core kernels against the CPU
// reference's e4m3 cache: both quantize the same bf16-exact k, v with the same scales, so the
// caches agree byte for byte; the outputs agree within bf16 rounding (the kernels widen e4m3 to bf16
// exactly and apply the scales in f32). Mixed batches run the prefill kernel, q = 3 verification
// the tensor-core decode kernel, single-token decode keys-as-rows (group <= 8) or the tensor-core
// decode kernel (group 16), split over the context, in a graph replayed at other lengths.
class CudaFp8KvCache : public CudaAttentionTest {
 protected:
  void SetUp() override {
    CudaAttentionTest::SetUp();
    if (IsSkipped()) return;
    for (auto [side, b] : {std::pair{&g, gpu.get()}, {&c, cpu.get()}}) {
      const Shape cs = side->cache.k.shape();
      side->cache = KVCacheLayer{Tensor::empty(cs, DType::F8E4M3, b->allocator()),
                                 Tensor::empty(cs, DType::F8E4M3, b->allocator()), 0.37f, 1.9f};
    }
  }

  void run_both(const Batch& b, uint32_t seed) {
    load(b, seed);
    run(g, b);
    run(c, b);
    expect_equal_to_cpu(b, actual(b));
  }
};

TEST_P(CudaFp8KvCache, MixedBatchMatchesCpu) { run_both(kMixed, 1100); }

TEST_P(CudaFp8KvCache, VerificationAndDecodeBatchesMatchCpu) {
  run_both(kUniform, 1200);
  run_both(Batch{{1, 1, 1, 1, 1}, {40, 160, 1, 77, 129}, 6, 8}, 1300);
}

TEST_P(CudaFp8KvCache, SingleDecodeGraphReplaysAtOtherContextLengths) { single_decode_graph_replays(1400); }

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFp8KvCache,
                         ::testing::Combine(::testing::Values(AttentionShape{32, 8, 64, 0.125f},  // Llama-3.2-1B
                                                              AttentionShape{12, 2, 128, 0.0f},   // Qwen2.5-1.5B
                                                              AttentionShape{32, 8, 128, 0.0f},   // Llama-3.1-8B
                                                              AttentionShape{64, 4, 128, 0.0f}),  // group 16
                                            ::testing::Values(DType::BF16)));

// Layers the tensor-core kernels cannot run (here head dim 96) refuse an e4m3 cache, saying why.
TEST(CudaFp8KvCacheRefusal, HeadDimNinetySixIsRefusedNamingTheFlag) {
  GS_REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::BF16);
  auto attn = make_cuda_attention(*gpu, AttentionShape{20, 1, 96, 0.0f});
  const Shape cs{kBlocks, kBlockSize, 1, 96};
  const KVCacheLayer cache{Tensor::empty(cs, DType::F8E4M3, gpu->allocator()),
                           Tensor::empty(cs, DType::F8E4M3, gpu->allocator())};
  Metadata meta(*gpu);
  const Batch b{{1}, {10}, 1, 1};
  meta.fill(*gpu, b);
  const Tensor q = Tensor::empty({1, 20 * 96}, DType::BF16, gpu->allocator());
  const Tensor k = Tensor::empty({1, 96}, DType::BF16, gpu->allocator()), v = k;
  try {
    attn->forward(q, k, v, cache, meta.md, q);
    FAIL() << "an e4m3 cache at head dim 96 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype fp8 runs on the tensor-core attention kernels"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttentionTest,
                         ::testing::Combine(::testing::Values(AttentionShape{32, 8, 64, 0.125f},    // Llama-3.2-1B
                                                              AttentionShape{8, 4, 8, 0.0f},        // stories260K
                                                              AttentionShape{12, 2, 128, 0.0f},     // Qwen2.5-1.5B
                                                              AttentionShape{20, 1, 96, 0.0f},      // group of 20 > 8
                                                              AttentionShape{4, 4, 256, 0.0625f}),  // MHA, widest head
                                            ::testing::Values(DType::BF16, DType::F32)));

}  // namespace
}  // namespace gs
