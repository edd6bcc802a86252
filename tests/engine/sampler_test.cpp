// Sampler: greedy, seeded reproducibility, truncation (top-k/top-p/min-p), penalties,
// logprobs; SamplingParams validation messages.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "runner/sampler.h"

namespace gs {
namespace {

constexpr int kVocab = 50;

std::vector<float> random_logits(uint32_t seed, int n = kVocab) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Req {
  std::vector<int32_t> tokens{1, 2, 3};
  std::vector<int32_t> blocks{0};
  SamplingParams params;
  ScheduledRequest r;
  Req(const Req&) = delete;  // `r` points into this object
  Req& operator=(const Req&) = delete;
  Req(SamplingParams p, uint64_t seed, int n_prompt = 3) : params(std::move(p)) {
    r.id = seed;
    r.all_token_ids = &tokens;
    r.num_prompt_tokens = n_prompt;
    r.block_ids = &blocks;
    r.sample = true;
    r.params = &params;
    r.seed = seed;
    r.num_output_tokens = static_cast<int>(tokens.size()) - n_prompt;
  }
};

SampledToken sample_one(std::vector<float> logits, const ScheduledRequest& r) {
  const ScheduledRequest* p = &r;
  return sample_tokens(logits.data(), static_cast<int>(logits.size()), {&p, 1})[0];
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  Req q(p, 1);
  for (uint32_t s = 0; s < 20; ++s) {
    auto l = random_logits(s);
    EXPECT_EQ(sample_one(l, q.r).token, argmax(l));
  }
  std::vector<float> tie(kVocab, 0.0f);
  tie[7] = tie[3] = tie[40] = 5.0f;
  EXPECT_EQ(sample_one(tie, q.r).token, 3);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  for (uint32_t s = 0; s < 20; ++s) {
    Req q(p, s);
    auto l = random_logits(s);
    EXPECT_EQ(sample_one(l, q.r).token, argmax(l));
  }
}

TEST(Sampler, SeededSamplingIsReproducibleAndBatchIndependent) {
  SamplingParams p;
  p.temperature = 1.0f;
  std::deque<Req> reqs;
  for (int i = 0; i < 8; ++i) reqs.emplace_back(p, 1000 + i);
  // Alone.
  std::vector<int32_t> alone;
  for (int i = 0; i < 8; ++i) alone.push_back(sample_one(random_logits(i), reqs[i].r).token);
  // Batched, in reverse order.
  std::vector<float> batch;
  std::vector<const ScheduledRequest*> ptrs;
  for (int i = 7; i >= 0; --i) {
    auto l = random_logits(i);
    batch.insert(batch.end(), l.begin(), l.end());
    ptrs.push_back(&reqs[i].r);
  }
  auto out = sample_tokens(batch.data(), kVocab, ptrs);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[7 - i].token, alone[i]);
    EXPECT_EQ(out[7 - i].id, reqs[i].r.id);
  }
  // Different seeds or output indices give different draws (most of the time).
  std::set<int32_t> seen;
  auto flat = std::vector<float>(kVocab, 0.0f);
  for (uint64_t seed = 0; seed < 64; ++seed) {
    Req q(p, seed);
    seen.insert(sample_one(flat, q.r).token);
  }
  EXPECT_GT(seen.size(), 25u) << "64 seeds over a uniform distribution of 50 tokens";
}

// Empirical frequencies over many seeds.
std::map<int32_t, int> histogram(const SamplingParams& p, const std::vector<float>& l, int n) {
  std::map<int32_t, int> h;
  for (int s = 0; s < n; ++s) {
    Req q(p, 12345 + s);
    ++h[sample_one(l, q.r).token];
  }
  return h;
}

TEST(Sampler, TemperatureSamplingFollowsSoftmax) {
  std::vector<float> l(kVocab, -30.0f);
  l[4] = std::log(0.5f);
  l[9] = std::log(0.3f);
  l[11] = std::log(0.2f);
  SamplingParams p;
  auto h = histogram(p, l, 4000);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_NEAR(h[4] / 4000.0, 0.5, 0.03);
  EXPECT_NEAR(h[9] / 4000.0, 0.3, 0.03);
  EXPECT_NEAR(h[11] / 4000.0, 0.2, 0.03);
}

TEST(Sampler, TopKTopPMinPRestrictTheSupport) {
  std::vector<float> l(kVocab);
  for (int i = 0; i < kVocab; ++i) l[i] = -0.1f * i;  // token 0 most likely, decreasing
  SamplingParams p;
  p.top_k = 5;
  auto h = histogram(p, l, 2000);
  EXPECT_EQ(h.size(), 5u);
  EXPECT_EQ(h.rbegin()->first, 4);

  // top_p: probs of tokens 0.. are proportional to exp(-0.1 i).
  p = SamplingParams{};
  p.top_p = 0.3f;
  std::vector<double> w(kVocab);
  double total = 0;
  for (int i = 0; i < kVocab; ++i) total += w[i] = std::exp(-0.1 * i);
  int expect_keep = 0;
  for (double acc = 0; acc < 0.3 * total;) acc += w[expect_keep++];
  h = histogram(p, l, 2000);
  EXPECT_EQ(static_cast<int>(h.size()), expect_keep);
  EXPECT_EQ(h.rbegin()->first, expect_keep - 1);

  p = SamplingParams{};
  p.min_p = 0.5f;  // keep p_i >= 0.5 p_0: exp(-0.1 i) >= 0.5 -> i <= 6
  h = histogram(p, l, 2000);
  EXPECT_EQ(h.size(), 7u);
  EXPECT_EQ(h.rbegin()->first, 6);
}

TEST(Sampler, RepetitionPenaltyHfStyle) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  Req q(p, 1);  // tokens 1, 2, 3 (prompt)
  std::vector<float> l(kVocab, 0.0f);
  l[1] = 4.0f;   // -> 2.0
  l[2] = -1.0f;  // -> -2.0
  l[5] = 3.0f;   // untouched: wins
  EXPECT_EQ(sample_one(l, q.r).token, 5);
  l[5] = 1.5f;  // token 1 (4 / 2 = 2) wins
  EXPECT_EQ(sample_one(l, q.r).token, 1);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOutputOnly) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  Req q(p, 1, /*n_prompt=*/2);  // prompt 1, 2; output 3
  q.tokens = {1, 2, 3, 3};
  q.r.num_output_tokens = 2;
  std::vector<float> l(kVocab, 0.0f);
  l[1] = 3.0f;  // prompt token: not penalised
  l[3] = 5.0f;  // 5 - 2*1 - 0.5 = 2.5
  EXPECT_EQ(sample_one(l, q.r).token, 1);
  l[1] = 2.4f;
  EXPECT_EQ(sample_one(l, q.r).token, 3);
}

TEST(Sampler, MinTokensMasksStopIds) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {7};
  Req q(p, 1);
  std::vector<float> l(kVocab, 0.0f);
  l[7] = 10.0f;
  l[8] = 1.0f;
  EXPECT_EQ(sample_one(l, q.r).token, 8);
  q.tokens = {1, 2, 3, 8, 8};
  q.r.num_output_tokens = 2;
  EXPECT_EQ(sample_one(l, q.r).token, 7);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;
  p.repetition_penalty = 1.5f;  // does not change the reported logprobs
  Req q(p, 1);
  auto l = random_logits(3);
  double z = 0;
  for (float x : l) z += std::exp(x);
  auto s = sample_one(l, q.r);
  EXPECT_NEAR(s.logprob, l[s.token] - std::log(z), 1e-4);
  ASSERT_EQ(s.top_logprobs.size(), 3u);
  EXPECT_EQ(s.top_logprobs[0].first, argmax(l));
  EXPECT_GE(s.top_logprobs[0].second, s.top_logprobs[1].second);
  EXPECT_GE(s.top_logprobs[1].second, s.top_logprobs[2].second);
  p.logprobs = -1;
  Req none(p, 1);
  EXPECT_TRUE(sample_one(l, none.r).top_logprobs.empty());
}

void expect_invalid(void (*mutate)(SamplingParams&), const std::string& needle) {
  SamplingParams p;
  mutate(p);
  try {
    p.validate(kVocab);
    ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SamplingParams, ValidationNamesParameterAndRange) {
  SamplingParams{}.validate(kVocab);
  expect_invalid([](SamplingParams& p) { p.temperature = -1; }, "temperature must be");
  expect_invalid([](SamplingParams& p) { p.top_p = 0; }, "top_p must be in (0, 1]");
  expect_invalid([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  expect_invalid([](SamplingParams& p) { p.top_k = -2; }, "top_k");
  expect_invalid([](SamplingParams& p) { p.min_p = 2; }, "min_p must be in [0, 1]");
  expect_invalid([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  expect_invalid([](SamplingParams& p) { p.presence_penalty = 3; }, "presence_penalty must be in [-2, 2]");
  expect_invalid([](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty");
  expect_invalid([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be >= 1");
  expect_invalid([](SamplingParams& p) { p.min_tokens = 20; }, "min_tokens");
  expect_invalid([](SamplingParams& p) { p.stop_token_ids = {kVocab}; }, "stop_token_ids");
  expect_invalid([](SamplingParams& p) { p.stop = {""}; }, "stop");
  expect_invalid([](SamplingParams& p) { p.logprobs = 21; }, "logprobs must be in [0, 20]");
}

}  // namespace
}  // namespace gs
