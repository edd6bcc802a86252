// The CUDA sampler against the CPU reference on the same f32 logits: identical tokens (every
// parameter, mixed in one batch, vocabularies of 1,000 and 128,256), logprobs within 1e-4, the
// penalty state kept on the device, a chi-square test of 100,000 draws, and a captured graph
// replayed with new parameters.
#include <gtest/gtest.h>

#include <random>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_backend.h"
#include "sampling/cuda/cuda_sampling.h"
#include "sampling/sampler_harness.h"

namespace gs {
namespace {

using test::sampling_row;

std::vector<std::vector<float>> random_rows(int n, int V, uint32_t seed, float sigma = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<std::vector<float>> x(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(V)));
  for (auto& row : x)
    for (float& v : row) v = d(rng);
  return x;
}

// Every kind of row: greedy, temperature, top-k, top-p, min-p, all three, penalties, bias,
// logprobs; seeds and steps differ per row.
std::vector<SamplingRow> mixed_rows(int n, std::vector<LogitAdjustment>& adj, int V) {
  std::vector<SamplingRow> rows;
  for (int i = 0; i < n; ++i) {
    SamplingRow r;
    switch (i % 9) {
      case 0: r = sampling_row(0.0f); break;
      case 1: r = sampling_row(1.0f); break;
      case 2: r = sampling_row(0.8f, 0, 0.95f); break;
      case 3: r = sampling_row(1.0f, 50, 0.95f); break;
      case 4: r = sampling_row(0.7f, 0, 1.0f, 0.05f); break;
      case 5: r = sampling_row(1.2f, 5); break;
      case 6: r = sampling_row(0.9f, 40, 0.9f, 0.01f); break;
      case 7: r = sampling_row(1.0f, 0, 0.5f); break;
      default: r = sampling_row(1e-30f, 5); break;
    }
    r.seed_lo = 1000u + uint32_t(i);
    r.seed_hi = uint32_t(i) * 7u;
    r.step = i * 3;
    if (i % 4 == 1) r.num_logprobs = i % 3 == 0 ? 0 : 5;
    if (i % 5 == 2) {
      r.adjust_begin = int(adj.size());
      adj.push_back({(i * 37) % V, 8.0f});
      adj.push_back({(i * 91) % V, -std::numeric_limits<float>::infinity()});
      r.adjust_end = int(adj.size());
    }
    if (i % 7 == 3 && i < 28) {  // slots 0..3, one row each
      r.penalty_slot = i / 7;
      r.repetition_penalty = 1.2f;
      r.presence_penalty = 0.4f;
      r.frequency_penalty = 0.3f;
    }
    rows.push_back(r);
  }
  return rows;
}

struct Pair {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0, DType::BF16);
  test::SamplerHarness ref, dev;
  Pair(int rows, int V)
      : ref(*cpu, make_cpu_sampling_kernels(*cpu), rows, V), dev(*gpu, make_cuda_sampling_kernels(*gpu), rows, V) {}
  void reset_slots() {
    const std::vector<int32_t> prompt{1, 2, 3, 5, 8}, output{3, 3, 13, 21};
    for (int s = 0; s < 4; ++s) {
      ref.sampler().reset_slot(s, prompt, output);
      dev.sampler().reset_slot(s, prompt, output);
    }
  }
};

void expect_same(const std::vector<TokenLogprob>& want, const std::vector<TokenLogprob>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].token, got[i].token) << what << " row " << i;
    EXPECT_NEAR(want[i].logprob, got[i].logprob, 1e-4) << what << " row " << i;
    ASSERT_EQ(want[i].top.size(), got[i].top.size()) << what << " row " << i;
    for (size_t j = 0; j < want[i].top.size(); ++j) {
      EXPECT_EQ(want[i].top[j].first, got[i].top[j].first) << what << " row " << i << " top " << j;
      EXPECT_NEAR(want[i].top[j].second, got[i].top[j].second, 1e-4);
    }
  }
}

// 72 rows take a CTA a row; 9 rows (each kind once) a cluster of 8 CTAs a row, whose selections
// combine the CTAs' histograms; there row 5 keeps 2,000 tokens (top-k above a CTA's threads: the
// radix select over the whole row instead of the gathered candidates), and row 3 keeps 700 (at
// 128,256 tokens a CTA gathers more than its region of rank 0's inbox holds: every CTA finishes
// over its own candidates, the cluster's histograms combined). At temperature 5, row 7's
// top-p of 0.5 keeps about 35,000 of 128,256 tokens of a nearly flat row: rejection rounds over
// the whole row. The third step's logits spread 4 times wider: most tokens' masses round to 0.
TEST(CudaSampler, DrawsWhatTheCpuReferenceDraws) {
  GS_REQUIRE_GPU();
  for (int V : {1000, 128256})
    for (int n : {72, 9}) {
      SCOPED_TRACE(testing::Message() << "V " << V << ", " << n << " rows");
      Pair p(n, V);
      p.reset_slots();
      for (int step = 0; step < 3; ++step) {  // penalty counts advance on both sides
        std::vector<LogitAdjustment> adj;
        auto rows = mixed_rows(n, adj, V);
        if (n < 16) rows[5].top_k = 2000, rows[3].top_k = 700;
        rows[7].temperature = 5.0f;
        for (auto& r : rows) r.step += step;
        const auto x = random_rows(n, V, 7 + uint32_t(step), step == 2 ? 12.0f : 3.0f);
        expect_same(p.ref.run(x, rows, adj), p.dev.run(x, rows, adj), "mixed batch");
      }
    }
}

// Structured output: rows with a bitmask (every other row, about a third of the vocabulary
// allowed) draw what the CPU reference draws, inside the mask; the other rows are unchanged.
TEST(CudaSampler, BitmaskRowsDrawWhatTheCpuReferenceDraws) {
  GS_REQUIRE_GPU();
  for (int V : {1000, 151936}) {
    SCOPED_TRACE(V);
    const int n = 64;
    Pair p(n, V);
    p.reset_slots();
    std::vector<LogitAdjustment> adj;
    auto rows = mixed_rows(n, adj, V);
    const int words = (V + 31) / 32;
    std::vector<uint32_t> masks;
    int k = 0;
    for (int i = 0; i < n; i += 2, ++k) {
      rows[size_t(i)].bitmask_row = k;
      for (int w = 0; w < words; ++w) masks.push_back(0x49249249u * uint32_t(i + 1) ^ uint32_t(w * 2654435761u));
    }
    const auto x = random_rows(n, V, 11);
    const auto want = p.ref.run(x, rows, adj, masks);
    expect_same(want, p.dev.run(x, rows, adj, masks), "bitmask batch");
    for (int i = 0; i < n; i += 2) {
      const uint32_t t = uint32_t(want[size_t(i)].token);
      EXPECT_TRUE((masks[size_t(i / 2) * size_t(words) + (t >> 5)] >> (t & 31)) & 1u) << "row " << i;
    }
  }
}

// Rows with NaN or +inf logits or nothing left to sample give the CPU reference's sentinels
// (found inside the kernel, carried by the sampled ids); the other rows draw what it draws.
TEST(CudaSampler, RowsThatCannotBeSampledGiveTheReferenceSentinels) {
  GS_REQUIRE_GPU();
  for (int V : {1000, 151936}) {
    SCOPED_TRACE(V);
    for (int copies : {1, 6}) {  // 15 rows: clusters of 8 CTAs a row; 90 rows: one CTA a row
      auto b = test::unsampleable_batch(V);
      const size_t n = b.rows.size();
      for (size_t i = n; i < n * size_t(copies); ++i) {
        b.x.push_back(b.x[i % n]);
        b.rows.push_back(b.rows[i % n]);
        b.want.push_back(b.want[i % n]);
      }
      Pair p(int(b.rows.size()), V);
      const auto want = p.ref.run(b.x, b.rows, {}, b.masks);
      const auto got = p.dev.run(b.x, b.rows, {}, b.masks);
      for (size_t i = 0; i < b.rows.size(); ++i) {
        EXPECT_EQ(got[i].token, want[i].token) << copies << " copies, row " << i;
        if (b.want[i] != -3) {
          EXPECT_EQ(got[i].token, b.want[i]) << copies << " copies, row " << i;
        }
      }
    }
  }
}

TEST(CudaSampler, ChiSquareOf100kDraws) {
  GS_REQUIRE_GPU();
  constexpr int V = 64, kRows = 256, kDraws = 100000;
  std::unique_ptr<Backend> gpu = make_cuda_backend(0, DType::BF16);
  test::SamplerHarness h(*gpu, make_cuda_sampling_kernels(*gpu), kRows, V);
  std::vector<float> x(V);
  for (int t = 0; t < V; ++t) x[t] = 1.5f - 0.13f * float(t) + 0.01f * float(t % 3);
  struct Case {
    float t;
    int k;
    float p;
    float min_p;
  } cases[] = {{0.8f, 0, 1.0f, 0.0f}, {1.0f, 10, 0.9f, 0.0f}, {1.1f, 0, 0.7f, 0.03f}};
  for (const auto& c : cases) {
    double margin = 1.0;
    const auto probs = test::reference_probs(x, c.t, c.k, c.p, c.min_p, &margin);
    ASSERT_GT(margin, 1e-4);
    std::vector<int> counts(V, 0);
    for (int done = 0; done < kDraws; done += kRows) {
      std::vector<SamplingRow> rows(size_t(std::min(kRows, kDraws - done)), sampling_row(c.t, c.k, c.p, c.min_p, 99));
      for (size_t i = 0; i < rows.size(); ++i) rows[i].step = done + int(i);
      for (const auto& r : h.run({x}, rows)) ++counts[size_t(r.token)];
    }
    for (int t = 0; t < V; ++t)
      if (probs[t] == 0.0) {
        EXPECT_EQ(counts[t], 0) << "token " << t;
      }
    const auto chi = test::chi_square(counts, probs, kDraws);
    EXPECT_LT(chi.statistic, chi.critical) << "t " << c.t << " k " << c.k << " p " << c.p;
  }
}

TEST(CudaSampler, ACapturedGraphSamplesWithTheRowsStagedBeforeReplay) {
  GS_REQUIRE_GPU();
  constexpr int V = 5000, n = 16;
  Pair p(n, V);
  const auto x = random_rows(n, V, 3);
  std::vector<LogitAdjustment> adj;
  auto rows = mixed_rows(n, adj, V);
  // Capture once (the logits upload stays outside), then replay with new rows and steps.
  Tensor logits = Tensor::empty({n, V}, DType::F32, p.gpu->allocator());
  std::vector<float> flat;
  for (const auto& r : x) flat.insert(flat.end(), r.begin(), r.end());
  p.dev.sampler().stage(rows, adj);
  p.gpu->stream().begin_capture();
  p.dev.sampler().sample(logits, n);
  auto graph = p.gpu->stream().end_capture();
  for (int step = 0; step < 3; ++step) {
    for (auto& r : rows) r.step += 11;
    p.gpu->copy(logits, Tensor::wrap(flat.data(), {n, V}, DType::F32, Device::cpu()));
    p.dev.sampler().stage(rows, adj);
    graph->replay();
    const auto got = p.dev.sampler().fetch(n);
    expect_same(p.ref.run(x, rows, adj), got, "replay");
  }
}

}  // namespace
}  // namespace gs
