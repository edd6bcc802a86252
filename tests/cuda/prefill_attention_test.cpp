// The tensor-core prefill and the decode attention kernels (attention/cuda/prefill_attention.h,
// decode_attention.h) against a float64 host
// reference and against the flash-decoding kernel: ragged batches of fresh prefills, chunked
// prefills and decodes, padded requests and tokens, block sizes 16 and 32, GQA ratios 1, 4, 6,
// 8, head dims 64 and 128 (D 64 on both its mma.sync and its wgmma kernel), contexts up to 8k, a sliding window, a
// graph replayed on another batch, the backend's dispatch of prefill batches to this kernel, and
// decode batches split over the context (eager and in a graph replayed on other contexts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attention/attention_backend.h"
#include "attention/attention_kernel_selection.h"
#include "attention/cuda/cuda_attention.h"
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/flash_decoding_attention.h"
#include "attention/cuda/prefill_attention.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
#include "paged_batch.h"

namespace gs {
namespace {

using namespace test;  // cuda_test_util.h, paged_batch.h

using Req = PagedReq;
struct Case {
  int hq, hkv, D, block_size;
  std::vector<Req> reqs;
  int pad_reqs = 0, pad_tokens = 0, window = -1;
};

using HostBatch = PagedBatch;  // paged_batch.h

HostBatch make_batch(const Case& c, uint32_t seed) {
  return make_paged_batch(c.hq, c.hkv, c.D, c.block_size, c.reqs, c.pad_reqs, c.pad_tokens, 0, seed);
}

// The cache after the step: every real token's k, v at its slot.
void write_slots(const Case& c, const HostBatch& h, std::vector<float>& kc, std::vector<float>& vc) {
  const size_t row = size_t(c.hkv) * c.D;
  for (int t = 0; t < h.T; ++t) {
    if (h.slots[size_t(t)] < 0) continue;
    std::copy_n(h.k.begin() + t * row, row, kc.begin() + size_t(h.slots[size_t(t)]) * row);
    std::copy_n(h.v.begin() + t * row, row, vc.begin() + size_t(h.slots[size_t(t)]) * row);
  }
}

// Float64 causal (optionally windowed) attention; rows of padded tokens are zeros.
std::vector<float> reference(const Case& c, const HostBatch& h) {
  std::vector<float> kc = h.kc, vc = h.vc, out(h.q.size(), 0.0f);
  write_slots(c, h, kc, vc);
  const int G = c.hq / c.hkv, D = c.D;
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> s, acc(static_cast<size_t>(D));
  for (size_t r = 0; r < c.reqs.size(); ++r) {
    const Req& rq = c.reqs[r];
    for (int i = 0; i < rq.q_len; ++i) {
      const int t = h.qsl[r] + i, pos = rq.ctx - rq.q_len + i;
      const int lo = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
      for (int hh = 0; hh < c.hq; ++hh) {
        const float* qp = &h.q[(size_t(t) * c.hq + hh) * D];
        s.assign(size_t(pos + 1), 0.0);
        double mx = -1e300;
        for (int j = lo; j <= pos; ++j) {
          const size_t slot = size_t(h.bt[r * h.max_blocks + j / c.block_size]) * c.block_size + j % c.block_size;
          const float* kp = &kc[(slot * c.hkv + hh / G) * D];
          double d = 0;
          for (int e = 0; e < D; ++e) d += double(qp[e]) * kp[e];
          s[size_t(j)] = d * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        double den = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = lo; j <= pos; ++j) {
          const size_t slot = size_t(h.bt[r * h.max_blocks + j / c.block_size]) * c.block_size + j % c.block_size;
          const float* vp = &vc[(slot * c.hkv + hh / G) * D];
          const double w = std::exp(s[size_t(j)] - mx);
          den += w;
          for (int e = 0; e < D; ++e) acc[size_t(e)] += w * vp[e];
        }
        for (int e = 0; e < D; ++e) out[(size_t(t) * c.hq + hh) * D + e] = float(acc[size_t(e)] / den);
      }
    }
  }
  return out;
}

// The batch on the GPU, with a poisoned output.
struct DeviceBatch {
  Tensor q, k, v, out, kc, vc, qsl, seq_lens, bt, slots;
  DeviceBatch(Backend& g, const Case& c, const HostBatch& h) {
    const int64_t row = int64_t(c.hkv) * c.D;
    q = on(g, h.q, {h.T, int64_t(c.hq) * c.D}, DType::BF16);
    k = on(g, h.k, {h.T, row}, DType::BF16);
    v = on(g, h.v, {h.T, row}, DType::BF16);
    out = on(g, randn(h.q.size(), 99), q.shape(), DType::BF16);
    kc = on(g, h.kc, {h.num_blocks, c.block_size, c.hkv, c.D}, DType::BF16);
    vc = on(g, h.vc, kc.shape(), DType::BF16);
    qsl = on_i32(g, h.qsl, {int64_t(h.qsl.size())});
    seq_lens = on_i32(g, h.seq_lens, {int64_t(h.seq_lens.size())});
    bt = on_i32(g, h.bt, {h.nrp, h.max_blocks});
    slots = on_i32(g, h.slots, {h.T});
  }
  // Every buffer's contents from `src` (a batch of the same shapes), for a graph replay; returns
  // once copied (src may go).
  void load(Backend& g, const DeviceBatch& src) {
    for (auto [dst, from] : {std::pair{&q, &src.q},
                             {&k, &src.k},
                             {&v, &src.v},
                             {&out, &src.out},
                             {&kc, &src.kc},
                             {&vc, &src.vc},
                             {&qsl, &src.qsl},
                             {&seq_lens, &src.seq_lens},
                             {&bt, &src.bt},
                             {&slots, &src.slots}})
      g.copy(*dst, *from);
    g.stream().synchronize();
  }
  // The kernels' parameters (no split workspace: the flash-decoding kernel runs unsplit).
  cuda::PagedAttentionParams params(const Case& c, const HostBatch& h) const {
    cuda::PagedAttentionParams p;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.out = out.data();
    p.k_cache = kc.data(), p.v_cache = vc.data();
    p.slot_mapping = slots.data_as<int32_t>();
    p.num_slots = int64_t(h.num_blocks) * c.block_size;
    p.query_start_loc = qsl.data_as<int32_t>();
    p.seq_lens = seq_lens.data_as<int32_t>();
    p.block_table = bt.data_as<int32_t>();
    p.num_reqs_padded = h.nrp, p.max_blocks_per_req = h.max_blocks;
    p.block_size = c.block_size, p.num_blocks = h.num_blocks;
    p.hq = c.hq, p.hkv = c.hkv, p.D = c.D;
    p.scale = 1.0f / std::sqrt(float(c.D));
    return p;
  }
};

class PrefillAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    GS_REQUIRE_GPU();
    gpu = make_cuda_backend(0, DType::BF16);
    stream = dynamic_cast<CudaStream&>(gpu->stream()).handle();
  }
  void sync() { GS_CUDA_CHECK(cudaStreamSynchronize(stream)); }

  // One launch of `kernel` (a tensor-core or decode kernel) on the test's stream.
  cudaError_t launch(AttentionKernel kernel, const cuda::PagedAttentionParams& p, const AttentionKernelOptions& o,
                     int window, int T) {
    switch (kernel) {
      case AttentionKernel::TensorCorePrefill: return cuda::prefill_attention(p, o, window, T, stream);
      case AttentionKernel::TensorCoreDecode: return cuda::tensor_core_decode_attention(p, o, window, T, stream);
      case AttentionKernel::KeysAsRowsDecode: return cuda::keys_as_rows_decode_attention(p, o, window, T, stream);
      case AttentionKernel::WarpPerPairDecode: return cuda::warp_per_pair_decode_attention(p, o, window, T, stream);
      case AttentionKernel::FlashDecoding: break;
    }
    return cuda::flash_decoding_attention(p, T, stream);
  }

  // `kernel`'s output and cache equal the float64 reference on this case under options `o`;
  // `split`: with a split workspace (decode batches then split each context over several CTAs),
  // launched twice (the merge's arrival counters must be left at zero for the next launch).
  void check_against_reference(const Case& c, uint32_t seed,
                               AttentionKernel kernel = AttentionKernel::TensorCorePrefill, bool split = false,
                               const AttentionKernelOptions& o = {}) {
    const HostBatch h = make_batch(c, seed);
    DeviceBatch d(*gpu, c, h);
    cuda::PagedAttentionParams p = d.params(c, h);
    if (split) with_workspace(p, c.D);
    for (int i = 0; i < (split ? 2 : 1); ++i) GS_CUDA_CHECK(launch(kernel, p, o, c.window, h.T));
    sync();
    EXPECT_LT(rel_l2(read(*gpu, d.out), reference(c, h)), 1e-2);
    std::vector<float> kc = h.kc, vc = h.vc;
    write_slots(c, h, kc, vc);
    EXPECT_TRUE(read(*gpu, d.kc) == kc) << "k cache differs";
    EXPECT_TRUE(read(*gpu, d.vc) == vc) << "v cache differs";
    expect_zero_tail(c, h, read(*gpu, d.out));
  }
  static void expect_zero_tail(const Case& c, const HostBatch& h, const std::vector<float>& out) {
    const size_t row = size_t(c.hq) * c.D;
    for (size_t i = size_t(h.qsl.back()) * row; i < size_t(h.T) * row; ++i) ASSERT_EQ(out[i], 0.0f) << i;
  }

  // Gives p the split workspace and zeroed arrival counters the attention backend owns.
  void with_workspace(cuda::PagedAttentionParams& p, int D) {
    ws = Tensor::empty({int64_t(cuda::split_workspace_floats(D))}, DType::F32, gpu->allocator());
    counters = Tensor::empty({cuda::kSplitCounters}, DType::I32, gpu->allocator());
    gpu->fill_zero(counters);
    p.split_workspace = ws.data_as<float>();
    p.split_counters = static_cast<unsigned*>(counters.data());
  }

  std::unique_ptr<Backend> gpu;
  cudaStream_t stream = nullptr;
  Tensor ws, counters;
};

// Fresh prefill, decode at a long context, chunked prefill, short decode, a prefill over one
// block of cached prefix; two padded requests and five padded tokens.
std::vector<Req> mixed() { return {{300, 300}, {1, 1000}, {77, 2000}, {1, 17}, {129, 193}}; }

// Block sizes 16 and 32, and 3 (a position's block by division, a 64-key tile over 22 blocks).
TEST_F(PrefillAttention, MixedBatchMatchesReference) {
  uint32_t seed = 1000;
  for (int bs : {3, 16, 32})
    for (auto [hq, hkv, D] : {std::tuple{8, 8, 64}, {32, 8, 64}, {32, 4, 128}, {12, 2, 128}, {16, 16, 128}}) {
      SCOPED_TRACE(testing::Message() << "block " << bs << " hq " << hq << " hkv " << hkv << " D " << D);
      check_against_reference(Case{hq, hkv, D, bs, mixed(), 2, 5}, seed++);
    }
}

// The D = 64 mma.sync kernel with one and with two m16 tiles per warp (64- and 128-row CTAs).
TEST_F(PrefillAttention, OneAndTwoTilesPerWarpMatchReference) {
  AttentionKernelOptions o;
  o.prefill_wgmma = false;
  uint32_t seed = 1500;
  for (int tiles : {2, 1}) {
    o.prefill_tiles_per_warp_d64 = tiles;
    for (auto [hq, hkv] : {std::pair{8, 8}, {32, 8}, {8, 1}, {12, 2}}) {
      SCOPED_TRACE(testing::Message() << "tiles " << tiles << " hq " << hq << " hkv " << hkv);
      check_against_reference(Case{hq, hkv, 64, 16, mixed(), 2, 5, hq == 8 ? 70 : -1}, seed++,
                              AttentionKernel::TensorCorePrefill, false, o);
    }
  }
}

// The D = 64 prefill on mma.sync and on wgmma (the default): GQA ratios 1, 4 and 8, block sizes
// 16 and 32, a mixed batch (prefills, chunks, decodes, padding) and a batch with a chunk and a
// decode at contexts near 8k.
TEST_F(PrefillAttention, WgmmaAndMmaSyncMatchReference) {
  uint32_t seed = 7000;
  for (bool wgmma : {false, true}) {
    AttentionKernelOptions o;
    o.prefill_wgmma = wgmma;
    for (int bs : {16, 32})
      for (int G : {1, 4, 8}) {
        SCOPED_TRACE(testing::Message() << "wgmma " << wgmma << " block " << bs << " G " << G);
        check_against_reference(Case{8 * G, 8, 64, bs, mixed(), 2, 5}, seed++, AttentionKernel::TensorCorePrefill,
                                false, o);
        check_against_reference(Case{G, 1, 64, bs, {{96, 8192}, {1, 7999}, {40, 40}}, 1, 3}, seed++,
                                AttentionKernel::TensorCorePrefill, false, o);
      }
  }
}

// Decode batches on the tensor-core decode kernel (64-row tiles): one or four new tokens per
// request, contexts from 1 to 3000, padded requests and tokens; with the tiles shared out among the
// CTA's warps (the default when a tile's rows fit one warp: 4 tokens x G 8 do not), query_start_loc
// staged in shared memory and (D 64) registers capped for four CTAs an SM, and without any of these
// (on the 1B shape at head dims 64 and 128).
TEST_F(PrefillAttention, DecodeBatchOnSmallTilesMatchesReference) {
  std::vector<Req> decode, verify;
  for (int i = 0; i < 40; ++i) decode.push_back({1, 1 + (i * 397) % 3000});
  for (int i = 0; i < 12; ++i) verify.push_back({4, 4 + (i * 211) % 900});
  uint32_t seed = 1700;
  for (bool on : {true, false}) {
    AttentionKernelOptions o;
    o.decode_warp_split = o.stage_query_starts = o.decode_four_ctas_per_sm = on;
    for (auto [hq, hkv, D] : {std::tuple{32, 8, 64}, {8, 8, 64}, {64, 8, 64}, {32, 8, 128}}) {
      if (!on && hq != 32) continue;  // the plain path: one shape is enough
      SCOPED_TRACE(testing::Message() << "warp split " << on << " hq " << hq << " hkv " << hkv << " D " << D);
      check_against_reference(Case{hq, hkv, D, 16, decode, 3, 3}, seed++, AttentionKernel::TensorCoreDecode, false, o);
      check_against_reference(Case{hq, hkv, D, 32, verify, 1, 4}, seed++, AttentionKernel::TensorCoreDecode, false, o);
    }
  }
}

// The warp-per-pair decode kernel at any pair count: one and four new tokens per request,
// contexts from 1 to 2000 (the block table read 32 entries at a time), padded requests and tokens,
// GQA 1 and 2 at head dim 128, block sizes 16 and 32, a sliding window; with 1, 2 and 4 warps a
// pair; a shape it does not hold (head dim 64, G 4) is refused.
TEST_F(PrefillAttention, DecodeWarpPerPairMatchesReference) {
  std::vector<Req> decode, verify;
  for (int i = 0; i < 24; ++i) decode.push_back({1, 1 + (i * 397) % 2000});
  for (int i = 0; i < 8; ++i) verify.push_back({4, 4 + (i * 211) % 900});
  uint32_t seed = 1900;
  const AttentionKernel kernel = AttentionKernel::WarpPerPairDecode;
  for (int warps : {1, 2, 4}) {
    AttentionKernelOptions o;
    o.warps_per_pair = warps;
    for (auto [hq, hkv] : {std::pair{16, 8}, {8, 8}}) {
      if (warps != 1 && hq == 8) continue;  // GQA 1: one round of warps is enough
      SCOPED_TRACE(testing::Message() << "warps " << warps << " hq " << hq << " hkv " << hkv);
      check_against_reference(Case{hq, hkv, 128, 16, decode, 3, 3}, seed++, kernel, false, o);
      check_against_reference(Case{hq, hkv, 128, 32, verify, 1, 4}, seed++, kernel, false, o);
      check_against_reference(Case{hq, hkv, 128, 16, decode, 0, 0, 700}, seed++, kernel, true, o);
    }
  }
  const Case c{32, 8, 128, 16, decode};
  const HostBatch h = make_batch(c, 1);
  DeviceBatch d(*gpu, c, h);
  cuda::PagedAttentionParams p = d.params(c, h);
  EXPECT_EQ(cuda::warp_per_pair_decode_attention(p, {}, -1, h.T, stream), cudaErrorInvalidValue);
  p.hq = 16, p.D = 64;
  EXPECT_EQ(cuda::warp_per_pair_decode_attention(p, {}, -1, h.T, stream), cudaErrorInvalidValue);
}

// The keys-as-rows decode kernel (keys_as_rows_kernel.cuh): one new token per request, contexts from 1 to
// 3000 (the last stage partly filled, one key alone), padded requests and tokens (zero rows, no
// cache write), GQA 1, 3, 4 and 8 at head dim 64 and 2, 4 at 128, block sizes 16, 32 and 24 (no
// shift), a sliding window; two requests with a split workspace (each context split over CTAs,
// launched twice: the arrival counters are left at zero); with the cache rows loaded after
// pdl_wait as well; three K/V stages at head dim 128 (few CTAs: the two-request launches) and two
// (40+ requests of 8 kv heads, and the two requests with deep stages off); a
// group it does not hold (G 16) is refused.
TEST_F(PrefillAttention, DecodeKeysAsRowsMatchesReference) {
  std::vector<Req> decode;
  for (int i = 0; i < 40; ++i) decode.push_back({1, 1 + (i * 397) % 3000});
  decode.push_back({1, 64});
  decode.push_back({1, 65});
  const std::vector<Req> few = {{1, 3000}, {1, 129}};
  uint32_t seed = 2100;
  for (auto [hq, hkv, D] : {std::tuple{32, 8, 64}, {9, 3, 64}, {8, 8, 64}, {64, 8, 64}, {32, 8, 128}, {16, 8, 128}}) {
    SCOPED_TRACE(testing::Message() << "hq " << hq << " hkv " << hkv << " D " << D);
    const AttentionKernel kernel = AttentionKernel::KeysAsRowsDecode;
    check_against_reference(Case{hq, hkv, D, 16, decode, 3, 3}, seed++, kernel);
    check_against_reference(Case{hq, hkv, D, 32, decode, 0, 0, 700}, seed++, kernel);
    check_against_reference(Case{hq, hkv, D, 24, decode, 1, 0}, seed++, kernel);
    check_against_reference(Case{hq, hkv, D, 16, few, 1, 2}, seed++, kernel, true);
    check_against_reference(Case{hq, hkv, D, 16, few, 0, 0, 1000}, seed++, kernel, true);
    AttentionKernelOptions late;
    late.keys_as_rows_early_loads = false;  // everything after pdl_wait
    check_against_reference(Case{hq, hkv, D, 16, decode, 3, 3}, seed++, kernel, false, late);
    AttentionKernelOptions shallow;
    shallow.keys_as_rows_deep_stages = false;
    check_against_reference(Case{hq, hkv, D, 16, few, 1, 2}, seed++, kernel, true, shallow);
  }
  const Case c{128, 8, 64, 16, few};  // G 16: more columns than the n8 tile
  const HostBatch h = make_batch(c, 1);
  DeviceBatch d(*gpu, c, h);
  EXPECT_EQ(cuda::keys_as_rows_decode_attention(d.params(c, h), {}, -1, h.T, stream), cudaErrorInvalidValue);
}

// Decode batches split over the context (flash-decoding on tensor cores): one to three requests
// (so each context gets many splits), contexts on both sides of the 64-key tile and the 2-tile
// split boundaries and up to 8k, GQA 1, 4 and 8, block sizes 16 and 32, head dims 64 and 128,
// a verification batch (4 tokens per request), a sliding window, and splits by length.
TEST_F(PrefillAttention, DecodeSplitOverTheContextMatchesReference) {
  const std::vector<std::vector<Req>> batches = {
      {{1, 1}},    {{1, 64}, {1, 65}, {1, 127}}, {{1, 128}, {1, 129}}, {{1, 256}, {1, 257}, {1, 1000}},
      {{1, 4095}}, {{1, 4096}, {1, 4097}},       {{1, 8000}, {1, 3}}};
  uint32_t seed = 8000;
  for (int bs : {16, 32})
    for (auto [G, D] : {std::pair{1, 64}, {4, 64}, {8, 64}, {4, 128}})
      for (const auto& reqs : batches) {
        SCOPED_TRACE(testing::Message() << "block " << bs << " G " << G << " D " << D << " first ctx " << reqs[0].ctx);
        check_against_reference(Case{2 * G, 2, D, bs, reqs, 1, 1}, seed++, AttentionKernel::TensorCoreDecode, true);
      }
  check_against_reference(Case{32, 8, 64, 16, {{4, 3000}, {4, 70}}, 1, 2}, seed++, AttentionKernel::TensorCoreDecode,
                          true);
  check_against_reference(Case{8, 2, 128, 32, {{1, 5000}, {1, 900}}, 0, 0, 700}, seed++,
                          AttentionKernel::TensorCoreDecode, true);
  // A base of one split (as a wide batch has): long contexts still split, into parts of at most
  // decode_split_max_tiles tiles, on both split kernels.
  AttentionKernelOptions by_length;
  by_length.decode_split_target = 1, by_length.decode_split_max_tiles = 4;
  for (const AttentionKernel k : {AttentionKernel::TensorCoreDecode, AttentionKernel::KeysAsRowsDecode})
    for (const int D : {64, 128})
      check_against_reference(Case{32, 8, D, 16, {{1, 3000}, {1, 129}, {1, 8000}}, 1, 2}, seed++, k, true, by_length);
}

// The split count of a decode launch (host arithmetic, no GPU): at decode_split_target 0 a small
// batch splits for the kernel's wave (here four CTAs an SM of 132, less 8 kv heads' tail: 520), the
// count rounded down so that the launch stays within it; an explicit target overrides the wave.
TEST(DecodeSplits, AKernelsWaveSetsASmallBatchsSplits) {
  float workspace = 0.0f;
  unsigned counters = 0;
  cuda::PagedAttentionParams p{};
  p.split_workspace = &workspace, p.split_counters = &counters;
  p.hq = 32, p.hkv = 8, p.D = 64, p.block_size = 16, p.max_blocks_per_req = 8192 / 16;
  const int wave = 4 * 132, room = wave - p.hkv;
  AttentionKernelOptions o;
  ASSERT_EQ(o.decode_split_target, 0);
  p.num_reqs_padded = 8;  // 64 (request, kv head) pairs: 520 / 64 = 8 splits (9 would be 576 CTAs)
  const cuda::DecodeSplit eight = cuda::decode_splits(p, o, 8, 9, wave);
  EXPECT_EQ(eight.base, 8);
  EXPECT_EQ(eight.splits, 8);
  EXPECT_LE(p.num_reqs_padded * eight.splits * p.hkv, room);
  p.num_reqs_padded = 1;  // 8 pairs: 65 splits of the wave, capped at kMaxDecodeSplits
  EXPECT_EQ(cuda::decode_splits(p, o, 1, 2, wave).splits, cuda::kMaxDecodeSplits);
  o.decode_split_target = 256;  // an explicit count: 256 / 64 pairs at 8 requests
  p.num_reqs_padded = 8;
  const cuda::DecodeSplit explicit_count = cuda::decode_splits(p, o, 8, 9, wave);
  EXPECT_EQ(explicit_count.base, 4);
  EXPECT_EQ(explicit_count.splits, 4);  // and 8k / decode_split_max_tiles 32 asks 4 by length
}

// A split decode launch captured on short contexts and replayed on long ones (and back): the
// split count is the padded shape's, the splits used follow each replay's contexts.
TEST_F(PrefillAttention, DecodeSplitGraphReplaysOnOtherContexts) {
  const Case shortc{32, 8, 64, 16, {{1, 100}, {1, 3}}, 0, 0}, longc{32, 8, 64, 16, {{1, 3000}, {1, 1500}}, 0, 0};
  HostBatch hs = make_batch(shortc, 8100);
  const HostBatch hl = make_batch(longc, 8101);
  // The short batch laid out in the long batch's block table and cache shape.
  hs.bt.assign(hl.bt.size(), 0);
  for (int r = 0; r < hs.nrp; ++r)
    std::copy_n(hl.bt.begin() + r * hl.max_blocks, (shortc.reqs[size_t(r)].ctx + 15) / 16,
                hs.bt.begin() + r * hl.max_blocks);
  hs.max_blocks = hl.max_blocks, hs.num_blocks = hl.num_blocks;
  hs.kc = randn(hl.kc.size(), 8102), hs.vc = randn(hl.vc.size(), 8103);
  for (int r = 0, t = 0; r < hs.nrp; ++r, ++t) {
    const int pos = shortc.reqs[size_t(r)].ctx - 1;
    hs.slots[size_t(t)] = hs.bt[size_t(r) * hs.max_blocks + pos / 16] * 16 + pos % 16;
  }
  DeviceBatch d(*gpu, longc, hl);
  cuda::PagedAttentionParams p = d.params(longc, hl);
  with_workspace(p, 64);
  const auto load = [&](const Case& c, const HostBatch& h) { d.load(*gpu, DeviceBatch(*gpu, c, h)); };
  load(shortc, hs);
  GS_CUDA_CHECK(cuda::tensor_core_decode_attention(p, {}, -1, hs.T, stream));  // eager warm-up
  gpu->stream().begin_capture();
  GS_CUDA_CHECK(cuda::tensor_core_decode_attention(p, {}, -1, hs.T, stream));
  auto graph = gpu->stream().end_capture();
  for (int round = 0; round < 2; ++round)
    for (auto [c, h] : {std::pair{&longc, &hl}, {&shortc, &hs}}) {
      SCOPED_TRACE(testing::Message() << "round " << round << " first ctx " << c->reqs[0].ctx);
      load(*c, *h);
      graph->replay();
      sync();
      EXPECT_LT(rel_l2(read(*gpu, d.out), reference(*c, *h)), 1e-2);
    }
}

TEST_F(PrefillAttention, ChunkAtEightThousandMatchesReference) {
  check_against_reference(Case{8, 1, 64, 16, {{96, 8192}, {1, 8000}, {33, 40}}, 1, 3}, 2000);
  check_against_reference(Case{4, 1, 128, 32, {{64, 8100}}, 0, 0}, 2001);
}

TEST_F(PrefillAttention, SlidingWindowMatchesReference) {
  for (int w : {1, 50, 100, 4096}) {
    SCOPED_TRACE(w);
    check_against_reference(Case{32, 8, 64, 16, mixed(), 1, 2, w}, 3000 + uint32_t(w));
  }
}

// A whole 8k prompt (and a mixed batch) against the flash-decoding kernel on the same inputs.
TEST_F(PrefillAttention, EightThousandPrefillEqualsDecodeKernel) {
  for (const Case& c : {Case{32, 8, 64, 16, {{8192, 8192}}, 0, 0},
                        Case{32, 8, 128, 32, {{4000, 4000}, {1, 7000}, {500, 6000}}, 3, 7}}) {
    const HostBatch h = make_batch(c, 4000);
    DeviceBatch d(*gpu, c, h), ref(*gpu, c, h);
    GS_CUDA_CHECK(cuda::prefill_attention(d.params(c, h), {}, c.window, h.T, stream));
    GS_CUDA_CHECK(cuda::flash_decoding_attention(ref.params(c, h), h.T, stream));
    sync();
    const auto got = read(*gpu, d.out), want = read(*gpu, ref.out);
    EXPECT_LT(rel_l2(got, want), 1e-2);
    expect_zero_tail(c, h, got);
    EXPECT_TRUE(read(*gpu, d.kc) == read(*gpu, ref.kc)) << "k cache differs";
  }
}

// Captured on one batch, replayed after another batch of the same padded shape (T tokens,
// num_reqs_padded requests) was written into the same buffers.
TEST_F(PrefillAttention, GraphReplayOnAnotherBatch) {
  const Case a{32, 8, 64, 16, {{100, 100}, {1, 450}, {27, 300}}, 1, 0};
  const Case b{32, 8, 64, 16, {{1, 400}, {120, 120}, {6, 9}}, 1, 1};
  const HostBatch ha = make_batch(a, 5000), hb0 = make_batch(b, 5001);
  ASSERT_EQ(ha.T, 128);
  // b's arrays sized like a's (T, blocks, block table), so they fit a's buffers.
  HostBatch hb = hb0;
  ASSERT_LE(hb.num_blocks, ha.num_blocks);
  ASSERT_LE(hb.max_blocks, ha.max_blocks);
  hb.bt.assign(ha.bt.size(), 0);
  for (int r = 0; r < hb.nrp; ++r)
    std::copy_n(hb0.bt.begin() + r * hb0.max_blocks, hb0.max_blocks, hb.bt.begin() + r * ha.max_blocks);
  hb.max_blocks = ha.max_blocks, hb.num_blocks = ha.num_blocks;
  hb.kc = randn(ha.kc.size(), 5002), hb.vc = randn(ha.vc.size(), 5003);
  hb.T = ha.T;
  hb.slots.resize(size_t(hb.T), -1);
  hb.q.resize(ha.q.size()), hb.k.resize(ha.k.size()), hb.v.resize(ha.v.size());

  DeviceBatch d(*gpu, a, ha);
  GS_CUDA_CHECK(cuda::prefill_attention(d.params(a, ha), {}, a.window, ha.T, stream));  // eager warm-up
  gpu->stream().begin_capture();
  GS_CUDA_CHECK(cuda::prefill_attention(d.params(a, ha), {}, a.window, ha.T, stream));
  auto graph = gpu->stream().end_capture();

  d.load(*gpu, DeviceBatch(*gpu, b, hb));
  graph->replay();
  sync();
  EXPECT_LT(rel_l2(read(*gpu, d.out), reference(b, hb)), 1e-2);
  expect_zero_tail(b, hb, read(*gpu, d.out));
}

// Through the backend: a batch with a long query goes to this kernel (its output is bit-equal to
// a direct launch) and equals the CPU backend.
TEST_F(PrefillAttention, BackendDispatchMatchesCpu) {
  const Case c{32, 8, 64, 16, {{200, 200}, {1, 70}, {40, 90}}, 2, 4};
  const HostBatch h = make_batch(c, 6000);
  auto cpu = make_cpu_backend();
  const AttentionShape shape{c.hq, c.hkv, c.D, 0.0f};
  auto ga = make_cuda_attention(*gpu, shape);
  auto ca = make_cpu_attention(*cpu, shape);
  std::vector<float> outs[2];
  int i = 0;
  for (auto [b, attn] : {std::pair{gpu.get(), ga.get()}, {cpu.get(), ca.get()}}) {
    const DType dt = b == gpu.get() ? DType::BF16 : DType::F32;
    const int64_t row = int64_t(c.hkv) * c.D;
    KVCacheLayer cache{on(*b, h.kc, {h.num_blocks, c.block_size, c.hkv, c.D}, dt), Tensor()};
    cache.v = on(*b, h.vc, cache.k.shape(), dt);
    AttentionMetadata md;
    md.query_start_loc = on_i32(*b, h.qsl, {int64_t(h.qsl.size())});
    md.seq_lens = on_i32(*b, h.seq_lens, {int64_t(h.seq_lens.size())});
    md.block_table = on_i32(*b, h.bt, {h.nrp, h.max_blocks});
    md.slot_mapping = on_i32(*b, h.slots, {h.T});
    md.num_reqs = int(c.reqs.size()), md.num_reqs_padded = h.nrp, md.max_query_len = 200;
    md.block_size = c.block_size, md.max_blocks_per_req = h.max_blocks;
    const Tensor out = on(*b, randn(h.q.size(), 77), {h.T, int64_t(c.hq) * c.D}, dt);
    const Tensor q = on(*b, h.q, out.shape(), dt), k = on(*b, h.k, {h.T, row}, dt), v = on(*b, h.v, {h.T, row}, dt);
    attn->forward(q, k, v, cache, md, out);
    outs[i++] = read(*b, out);
  }
  EXPECT_LT(rel_l2(outs[0], outs[1]), 1e-2);
  expect_zero_tail(c, h, outs[0]);
  DeviceBatch d(*gpu, c, h);
  GS_CUDA_CHECK(cuda::prefill_attention(d.params(c, h), {}, c.window, h.T, stream));
  sync();
  EXPECT_TRUE(read(*gpu, d.out) == outs[0]) << "the backend did not run the prefill kernel";
}

}  // namespace
}  // namespace gs
