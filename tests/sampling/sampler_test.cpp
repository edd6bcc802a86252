// The CPU sampler (the reference CI tests): exact supports of top-k / top-p / min-p, the drawn
// distribution against a plain reference (chi-square over 100,000 seeded draws), penalties and
// logit_bias against a direct computation, raw logprobs, determinism and degenerate parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "sampling/sampler_harness.h"
#include "sampling/sampling_math.h"

namespace gs {
namespace {

using test::reference_probs;
using test::sampling_row;

constexpr int kV = 32;

// Logits with a geometric-like spread and no ties: x_t = 2 - 0.21 t + small jitter.
std::vector<float> ladder() {
  std::vector<float> x(kV);
  for (int t = 0; t < kV; ++t) x[t] = 2.0f - 0.21f * float(t) + 0.013f * float((t * 7) % 5);
  return x;
}

std::vector<float> random_logits(uint32_t seed, int n, float sd = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

class CpuSampler : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
  test::SamplerHarness h{*be, make_cpu_sampling_kernels(*be), 256, kV};

  // Counts of `n` draws of row `base` at steps 0 .. n-1 (256 rows a call).
  std::vector<int> draw_counts(const std::vector<float>& x, SamplingRow base, int n) {
    std::vector<int> counts(kV, 0);
    for (int done = 0; done < n;) {
      std::vector<SamplingRow> rows;
      for (int i = 0; i < 256 && done + i < n; ++i) {
        rows.push_back(base);
        rows.back().step = done + i;
      }
      for (const TokenLogprob& r : h.run({x}, rows)) ++counts[size_t(r.token)];
      done += int(rows.size());
    }
    return counts;
  }
};

struct Case {
  const char* name;
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

const Case kCases[] = {
    {"temperature 0.7", 0.7f, 0, 1.0f, 0.0f},
    {"temperature 1.5", 1.5f, 0, 1.0f, 0.0f},
    {"top_k 5", 1.0f, 5, 1.0f, 0.0f},
    {"top_p 0.8", 1.0f, 0, 0.8f, 0.0f},
    {"top_p 0.35 at 0.6", 0.6f, 0, 0.35f, 0.0f},
    {"min_p 0.2", 1.0f, 0, 1.0f, 0.2f},
    {"top_k 12 + top_p 0.9", 1.3f, 12, 0.9f, 0.0f},
    {"all three", 0.9f, 20, 0.95f, 0.02f},
};

TEST_F(CpuSampler, SupportIsExactAndDrawsFollowTheDistribution) {
  const auto x = ladder();
  constexpr int kDraws = 100000;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    double margin = 1.0;
    const auto p = reference_probs(x, c.temperature, c.top_k, c.top_p, c.min_p, &margin);
    ASSERT_GT(margin, 1e-4) << "the case sits on a top-p boundary: pick another top_p";
    const auto counts = draw_counts(x, sampling_row(c.temperature, c.top_k, c.top_p, c.min_p, 42), kDraws);
    for (int t = 0; t < kV; ++t) {
      if (p[t] == 0.0) {
        EXPECT_EQ(counts[t], 0) << "token " << t << " is outside the kept set";
      } else if (kDraws * p[t] >= 20.0) {
        EXPECT_GT(counts[t], 0) << "token " << t << " is kept but never drawn";
      }
    }
    const auto chi = test::chi_square(counts, p, kDraws);
    EXPECT_LT(chi.statistic, chi.critical) << "df " << chi.df;
  }
}

TEST_F(CpuSampler, AWrongTemperatureFailsTheChiSquare) {  // the test above can fail
  const auto x = ladder();
  const auto counts = draw_counts(x, sampling_row(0.7f, 0, 1.0f, 0.0f, 42), 100000);
  const auto chi = test::chi_square(counts, reference_probs(x, 0.8f, 0, 1.0f, 0.0f), 100000);
  EXPECT_GT(chi.statistic, chi.critical);
}

TEST_F(CpuSampler, TopKKeepsTiesAtTheBoundary) {
  std::vector<float> x(kV, -5.0f);
  x[3] = 2.0f, x[9] = 1.0f, x[17] = 1.0f, x[20] = 1.0f;  // the 2nd largest value is shared by three
  std::set<int> seen;
  for (int step = 0; step < 400; ++step) seen.insert(h.run({x}, {sampling_row(1.0f, 2, 1.0f, 0.0f, 7, step)})[0].token);
  EXPECT_EQ(seen, (std::set<int>{3, 9, 17, 20}));
}

TEST_F(CpuSampler, GreedyIsArgmaxWithLowestIdOnTies) {
  auto x = random_logits(3, kV);
  x[11] = x[25] = 9.0f;
  EXPECT_EQ(h.run({x}, {sampling_row(0.0f)})[0].token, 11);
  EXPECT_EQ(h.run({x}, {sampling_row(1e-6f, 5)})[0].token, 11);  // under 1e-5: greedy
}

// Structured output: a row with a bitmask draws only allowed tokens (greedy and sampled), and
// a row without one beside it draws exactly what it draws alone.
TEST_F(CpuSampler, BitmaskRowsDrawOnlyAllowedTokensAndOthersAreUntouched) {
  const auto x = random_logits(9, kV);
  const int words = h.sampler().mask_words();
  std::vector<uint32_t> masks(size_t(words) * 2, 0u);
  const std::set<int> allowed0 = {2, 5}, allowed1 = {kV - 1};
  for (int t : allowed0) masks[size_t(t >> 5)] |= 1u << (t & 31);
  for (int t : allowed1) masks[size_t(words + (t >> 5))] |= 1u << (t & 31);
  std::set<int> seen;
  for (int step = 0; step < 200; ++step) {
    SamplingRow a = sampling_row(1.0f, 0, 1.0f, 0.0f, 3, step), b = sampling_row(0.0f),
                free = sampling_row(0.9f, 0, 1.0f, 0.0f, 8, step);
    a.bitmask_row = 0, b.bitmask_row = 1;
    const int alone = h.run({x}, {free})[0].token;
    auto out = h.run({x}, {a, free, b}, {}, masks);
    seen.insert(out[0].token);
    EXPECT_EQ(out[1].token, alone);
    EXPECT_EQ(out[2].token, kV - 1);
  }
  EXPECT_EQ(seen, allowed0);
}

TEST_F(CpuSampler, SeededDrawsDependOnlyOnSeedAndStep) {
  const auto x = random_logits(5, kV);
  const SamplingRow mine = sampling_row(0.9f, 10, 0.9f, 0.0f, 1234, 17);
  const int alone = h.run({x}, {mine})[0].token;
  std::vector<std::vector<float>> xs;
  std::vector<SamplingRow> rows;
  for (int i = 0; i < 65; ++i) {
    xs.push_back(i == 40 ? x : random_logits(100 + i, kV));
    rows.push_back(i == 40 ? mine : sampling_row(1.0f, 0, 1.0f, 0.0f, 9 + i, i));
  }
  EXPECT_EQ(h.run(xs, rows)[40].token, alone);
  std::set<int> across_steps;
  for (int step = 0; step < 64; ++step)
    across_steps.insert(h.run({x}, {sampling_row(1.0f, 0, 1.0f, 0.0f, 1234, step)})[0].token);
  EXPECT_GT(across_steps.size(), 5u) << "different steps must draw differently";
}

TEST_F(CpuSampler, PenaltiesAndLogitBiasEqualADirectComputation) {
  const auto x = random_logits(11, kV);
  const std::vector<int32_t> prompt{1, 2, 3, 3}, output{3, 7, 7, 30};
  h.sampler().reset_slot(2, prompt, output);
  SamplingRow r = sampling_row(0.0f);
  r.penalty_slot = 2;
  r.repetition_penalty = 1.3f;
  r.presence_penalty = 0.5f;
  r.frequency_penalty = 0.25f;
  r.adjust_begin = 0;
  r.adjust_end = 2;
  const std::vector<LogitAdjustment> adj{{5, 4.5f}, {8, -std::numeric_limits<float>::infinity()}};
  const int token = h.run({x}, {r}, adj)[0].token;

  std::vector<float> want = x;
  std::vector<int> count(kV, 0);
  for (int t : output) ++count[t];
  for (int t = 0; t < kV; ++t) {
    const bool seen = count[t] > 0 || std::find(prompt.begin(), prompt.end(), t) != prompt.end();
    if (seen) want[t] = want[t] > 0 ? want[t] / 1.3f : want[t] * 1.3f;
    if (count[t] > 0) want[t] -= 0.25f * float(count[t]) + 0.5f;
  }
  want[5] += 4.5f;
  want[8] = -std::numeric_limits<float>::infinity();
  const auto got = h.logits_row(0);
  for (int t = 0; t < kV; ++t) EXPECT_FLOAT_EQ(got[t], want[t]) << "token " << t;
  EXPECT_EQ(token, std::max_element(want.begin(), want.end()) - want.begin());

  // The sampled token now counts once more: the next step penalises it further.
  const auto again = h.run({x}, {r}, adj);
  const auto got2 = h.logits_row(0);
  ++count[token];
  float w = x[token];
  w = w > 0 ? w / 1.3f : w * 1.3f;
  w -= 0.25f * float(count[token]) + 0.5f;
  if (token == 5) w += 4.5f;
  EXPECT_FLOAT_EQ(got2[token], w);
}

TEST_F(CpuSampler, LogprobsAreRawLogSoftmax) {
  const auto x = random_logits(21, kV);
  double mx = *std::max_element(x.begin(), x.end()), sum = 0.0;
  for (float v : x) sum += std::exp(double(v) - mx);
  const double lse = mx + std::log(sum);
  SamplingRow r = sampling_row(1.0f, 0, 1.0f, 0.0f, 3);
  r.num_logprobs = 5;
  r.adjust_end = 1;  // a bias must not change the reported logprobs
  const auto out = h.run({x}, {r}, {{0, 3.0f}})[0];
  EXPECT_NEAR(out.logprob, x[size_t(out.token)] - lse, 1e-5);
  std::vector<int> order(kV);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  ASSERT_EQ(out.top.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(out.top[i].first, order[i]);
    EXPECT_NEAR(out.top[i].second, x[order[i]] - lse, 1e-5);
  }
}

TEST_F(CpuSampler, DegenerateParametersGiveDefinedResults) {
  const auto x = random_logits(31, kV);
  const int best = int(std::max_element(x.begin(), x.end()) - x.begin());
  EXPECT_EQ(h.run({x}, {sampling_row(1e-40f, 5)})[0].token, best);                // tiny temperature: greedy
  EXPECT_EQ(h.run({x}, {sampling_row(1.0f, 0, 1e-9f, 0.0f, 5)})[0].token, best);  // top_p ~ 0: the top token
  EXPECT_EQ(h.run({x}, {sampling_row(1.0f, 0, 1.0f, 1.0f, 5)})[0].token, best);   // min_p 1: the top token
  std::vector<LogitAdjustment> all;
  for (int t = 0; t < kV; ++t) all.push_back({t, -100.0f});
  SamplingRow r = sampling_row(1.0f, 0, 0.9f, 0.0f, 5);
  r.adjust_end = kV;
  const int biased = h.run({x}, {r}, all)[0].token;
  EXPECT_TRUE(biased >= 0 && biased < kV);
  std::vector<float> masked(kV, -std::numeric_limits<float>::infinity());
  masked[4] = 1.0f;  // one token left: every rule takes it
  EXPECT_EQ(h.run({masked}, {sampling_row(1.0f, 5, 0.9f)})[0].token, 4);
  EXPECT_EQ(h.run({masked}, {sampling_row(0.0f)})[0].token, 4);
}

// Rows with a NaN or +inf logit, or with every logit -inf (masked), give the sentinels instead
// of a token; the other rows of the batch draw exactly what they draw alone.
TEST_F(CpuSampler, RowsThatCannotBeSampledGiveSentinelsAndLeaveTheOthersAlone) {
  for (int V : {kV, 1000}) {
    SCOPED_TRACE(V);
    auto b = test::unsampleable_batch(V);
    test::SamplerHarness wide(*be, make_cpu_sampling_kernels(*be), int(b.rows.size()), V);
    const auto got = wide.run(b.x, b.rows, {}, b.masks);
    for (size_t i = 0; i < b.rows.size(); ++i) {
      if (b.want[i] != -3) {
        EXPECT_EQ(got[i].token, b.want[i]) << "row " << i;
        continue;
      }
      const auto alone = wide.run({b.x[i]}, {b.rows[i]});
      EXPECT_EQ(got[i].token, alone[0].token) << "row " << i;
      EXPECT_TRUE(got[i].token >= 0 && got[i].token < V && std::isfinite(b.x[i][size_t(got[i].token)])) << "row " << i;
    }
  }
}

// A sentinel row with a penalty slot leaves the slot's counts as they were.
TEST_F(CpuSampler, ASentinelRowCountsNoToken) {
  const std::vector<int32_t> prompt{1, 2}, none;
  h.sampler().reset_slot(0, prompt, none);
  SamplingRow r = sampling_row(0.0f);
  r.penalty_slot = 0;
  r.repetition_penalty = 1.5f;
  auto x = ladder();
  x[9] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(h.run({x}, {r})[0].token, kNonFiniteLogits);
  // The slot saw no output token: token 0 (the ladder's top, 2.0) is unpenalised. Counted once,
  // it falls to 2.0 / 1.5 = 1.33, below token 3 (1.38; tokens 1 and 2 are prompt tokens).
  EXPECT_EQ(h.run({ladder()}, {r})[0].token, 0);
  EXPECT_EQ(h.run({ladder()}, {r})[0].token, 3);
}

// Every Philox word gives a finite noise (none is a sure win), the extremes at the ends.
TEST(SamplingMath, EveryDrawIsAFiniteNoise) {
  using sampling::gumbel;
  EXPECT_TRUE(std::isfinite(gumbel(0u)) && std::isfinite(gumbel(~0u)));
  for (uint32_t bits : {1u << 9, 0x7fffffffu, 0xfffffc00u, 0xfffffe00u})
    EXPECT_TRUE(gumbel(0u) <= gumbel(bits) && gumbel(bits) <= gumbel(~0u)) << bits;
  EXPECT_LT(gumbel(0xfffffc00u), gumbel(~0u));
}

// A token below negligible_below(m) neither weighs (its mass is 0) nor wins (its best score
// stays under the top token's worst), at every scale of m, so a draw over the tokens above it is
// the draw over the row (the CUDA sampler gathers only those on a peaked row).
TEST(SamplingMath, TokensBelowTheNegligibleCutNeitherWeighNorWin) {
  using namespace sampling;
  const float noise_hi = gumbel(~0u), noise_lo = gumbel(0u);
  EXPECT_LT(noise_hi - noise_lo + 1.0f, kNegligibleBelow);
  for (float m : {0.0f, 1.0f, -3.0f, 25.0f, 400.0f, -1e4f, 3e5f, 1e12f, 1e30f}) {
    SCOPED_TRACE(m);
    const float cut = negligible_below(m);
    ASSERT_LT(cut, m);
    const float below = std::nextafter(cut, -std::numeric_limits<float>::infinity());
    EXPECT_EQ(mass_of(below, m), 0u);
    EXPECT_LT(add_rn(below, noise_hi), add_rn(m, noise_lo));
    EXPECT_GT(cut, m - 23.0f - std::abs(m) * 0x1p-19f);  // and no farther than that needs
  }
}

}  // namespace
}  // namespace gs
