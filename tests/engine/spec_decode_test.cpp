// Speculative decoding end to end on the real stories260K model: with n-gram proposals and with
// a draft model (stories260K itself: every proposal accepted; a dummy "tiny" draft: few) the
// greedy output is token for token the Hugging Face goldens (so also what no speculation gives)
// in every graph mode, with preemption, chunked prefill and prefix caching; seeded sampled
// requests give the same tokens as without speculation; unseeded sampling has the same
// distribution (chi-square); no graph is captured after start-up.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "stories260k_goldens.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

std::string ngram_json(int k) {
  return fmt::format(
      R"({{"method": "ngram", "num_speculative_tokens": {}, "prompt_lookup_min": 2, "prompt_lookup_max": 4}})", k);
}

std::string draft_json(const std::string& model, int k) {
  return fmt::format(R"({{"method": "draft_model", "model": "{}", "num_speculative_tokens": {}}})", model, k);
}

EngineConfig spec_config(const std::string& mode, int k, const std::string& spec_json = "") {
  EngineConfig cfg = test::stories_config();
  cfg.speculative = SpeculativeConfig::parse(spec_json.empty() ? ngram_json(k) : spec_json);
  if (mode != "NONE") {
    cfg.enforce_eager = false;
    cfg.compilation.apply_json(
        fmt::format(R"({{"cudagraph_mode": "{}", "cudagraph_capture_sizes": [1, 2, 4, 8, 16]}})", mode));
  }
  return cfg;
}

// Runs every request to the end; returns each one's tokens (by id).
std::map<RequestId, std::vector<int32_t>> run_all(LLMEngine& engine) {
  std::map<RequestId, std::vector<int32_t>> ids;
  while (engine.has_unfinished_requests())
    for (const auto& o : engine.step()) {
      ids[o.id].insert(ids[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      EXPECT_EQ(int(ids[o.id].size()), o.num_output_tokens);
    }
  return ids;
}

EngineStats expect_goldens(const EngineConfig& cfg, int waves) {
  const auto goldens = test::load_stories_goldens();
  LLMEngine engine(cfg);
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = 64;
  for (int wave = 0; wave < waves; ++wave) {
    std::map<RequestId, size_t> which;
    for (size_t i = 0; i < goldens.size(); ++i) which[engine.add_request(goldens[i].input_ids, p)] = i;
    auto ids = run_all(engine);
    for (auto& [id, i] : which) EXPECT_EQ(ids[id], goldens[i].output_ids) << goldens[i].name << " wave " << wave;
  }
  const EngineStats s = engine.stats();
  EXPECT_GT(s.num_preemptions, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_EQ(s.graphs.graph_captures_after_startup, 0u);
  // Proposals were verified, some accepted and some rejected (the rollback path ran).
  EXPECT_GT(s.spec.num_drafts, 20u);
  EXPECT_EQ(s.spec.num_emitted_tokens, s.spec.num_drafts + s.spec.num_accepted_tokens);
  EXPECT_GE(s.spec.accepted_per_pos.front(), s.spec.accepted_per_pos.back());
  const CUDAGraphMode m = s.graphs.resolved_mode;
  if (m == CUDAGraphMode::FULL || m == CUDAGraphMode::FULL_DECODE_ONLY || m == CUDAGraphMode::FULL_AND_PIECEWISE) {
    EXPECT_GT(s.graphs.steps_full, 0u);  // uniform verification batches replayed FULL graphs
  }
  return s;
}

class SpecDecodeModes : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecDecodeModes, GreedyNgramMatchesGoldensWithPreemption) {
  const EngineStats s = expect_goldens(spec_config(GetParam(), 3), 1);
  EXPECT_LT(s.spec.num_accepted_tokens, s.spec.num_draft_tokens);  // rejections rolled back
}

// The draft is the target itself: every greedy proposal is accepted.
TEST_P(SpecDecodeModes, DraftModelItselfAcceptsEveryProposal) {
  const EngineStats s = expect_goldens(spec_config(GetParam(), 3, draft_json(test::stories260k_dir().string(), 3)), 1);
  EXPECT_EQ(s.spec.num_accepted_tokens, s.spec.num_draft_tokens);
  EXPECT_EQ(s.spec.draft.graph_captures_after_startup, 0u);
  EXPECT_EQ(s.spec.draft.resolved_mode, s.graphs.resolved_mode);
}

// A dummy draft of the same vocabulary (the "tiny" preset: stories260K's shape, random weights):
// few proposals survive, the output is still exactly the target's.
TEST_P(SpecDecodeModes, DummyDraftModelRejectsMostButMatchesGoldens) {
  const EngineStats s = expect_goldens(spec_config(GetParam(), 2, draft_json("tiny", 2)), 1);
  EXPECT_LT(s.spec.acceptance_rate(), 0.2);
  EXPECT_EQ(s.spec.draft.graph_captures_after_startup, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllModes, SpecDecodeModes,
                         ::testing::Values("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"));

// Prefix-cache hashes cover accepted tokens only: a second wave reuses the first wave's blocks.
TEST(SpecDecode, PrefixCachingHoldsOnlyAcceptedTokens) {
  EngineConfig cfg = spec_config("FULL_AND_PIECEWISE", 5);
  cfg.enable_prefix_caching = true;
  cfg.kv_cache_memory_bytes = 1280 * 16 * 24;
  expect_goldens(cfg, 2);
}

std::vector<int32_t> repetitive_prompt(const LLMEngine& e) {
  return e.tokenizer().encode("Lily saw a cat. Lily saw a dog. Lily saw a cat. Lily saw", true);
}

// Sampled requests with a seed: every emitted token is the draw a plain step makes for that
// output index, so speculation changes nothing, whatever the stop conditions.
TEST(SpecDecode, SeededSamplingEqualsNoSpeculation) {
  EngineConfig plain = test::stories_config();
  plain.kv_cache_memory_bytes = 0;
  EngineConfig spec = spec_config("FULL_AND_PIECEWISE", 4);
  spec.kv_cache_memory_bytes = 0;
  LLMEngine a(plain), b(spec);
  std::vector<std::pair<RequestId, RequestId>> pairs;
  for (int i = 0; i < 12; ++i) {
    SamplingParams p;
    p.temperature = 0.3f + 0.1f * float(i % 5);
    p.top_p = i % 3 == 0 ? 0.9f : 1.0f;
    p.top_k = i % 4 == 1 ? 20 : 0;
    p.seed = 1000 + i;
    p.max_tokens = 24 + i;
    p.min_tokens = i % 2 ? 5 : 0;
    p.logprobs = i % 3 == 2 ? 2 : -1;
    if (i == 7) p.stop = {"dog"};
    pairs.emplace_back(a.add_request(repetitive_prompt(a), p), b.add_request(repetitive_prompt(b), p));
  }
  auto out_a = run_all(a), out_b = run_all(b);
  for (auto [ia, ib] : pairs) EXPECT_EQ(out_a[ia], out_b[ib]) << "request " << ia;
  EXPECT_GT(b.stats().spec.num_accepted_tokens, 10u);
}

// Pearson's chi-square statistic of two samples' counts over shared categories (rare ones
// pooled), with its degrees of freedom.
std::pair<double, int> two_sample_chi_square(const std::map<int, int>& x, const std::map<int, int>& y, int nx, int ny) {
  std::map<int, std::pair<int, int>> cells;
  std::pair<int, int> rare{0, 0};
  std::map<int, int> total;
  for (auto [t, c] : x) total[t] += c;
  for (auto [t, c] : y) total[t] += c;
  for (auto [t, c] : total) {
    auto& cell = c >= 20 ? cells[t] : rare;
    cell.first += x.count(t) ? x.at(t) : 0;
    cell.second += y.count(t) ? y.at(t) : 0;
  }
  if (rare.first + rare.second > 0) cells[-1] = rare;
  double chi = 0.0;
  for (auto [t, c] : cells) {
    const double n = c.first + c.second, ex = n * nx / (nx + ny), ey = n * ny / (nx + ny);
    chi += (c.first - ex) * (c.first - ex) / ex + (c.second - ey) * (c.second - ey) / ey;
  }
  return {chi, int(cells.size()) - 1};
}

// The output distribution with speculation is that of plain sampling: two independent samples
// (different engine seeds) of the tokens drawn at proposed positions agree by a chi-square test.
TEST(SpecDecode, SampledDistributionMatchesNoSpeculation) {
  constexpr int kRequests = 400;
  auto sample = [&](bool speculate, uint64_t seed) {
    EngineConfig cfg = speculate ? spec_config("NONE", 3) : test::stories_config();
    cfg.kv_cache_memory_bytes = 0;
    cfg.max_num_seqs = 64;
    cfg.max_num_batched_tokens = 2048;
    cfg.seed = seed;
    LLMEngine e(cfg);
    SamplingParams p;
    p.temperature = 1.0f;
    p.max_tokens = 4;
    p.ignore_eos = true;
    for (int i = 0; i < kRequests; ++i) e.add_request(repetitive_prompt(e), p);
    std::map<int, int> counts;  // (token at output 1, token at output 3) pairs
    for (auto& [id, t] : run_all(e)) ++counts[t[1] * 1000 + t[3] % 1000];
    return std::make_pair(counts, e.stats().spec);
  };
  auto [plain, none] = sample(false, 1);
  auto [spec, stats] = sample(true, 2);
  EXPECT_GT(stats.num_accepted_tokens, uint64_t(kRequests / 20));
  EXPECT_LT(stats.num_accepted_tokens, stats.num_draft_tokens);  // rejections and resamples happened
  auto [chi, dof] = two_sample_chi_square(plain, spec, kRequests, kRequests);
  ASSERT_GE(dof, 3);
  // The 0.1% critical value (Wilson-Hilferty): a correct sampler fails 1 run in 1000.
  const double z = 3.09, h = 2.0 / (9.0 * dof);
  const double critical = dof * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
  EXPECT_LT(chi, critical) << "dof " << dof;
  EXPECT_GT(chi, 0.0);  // two independent samples (a shared seed would make them equal)
}

}  // namespace
}  // namespace gs

namespace gs {
namespace {

TEST(SpecDecode, DraftVocabularyMismatchIsAClearError) {
  EngineConfig cfg = spec_config("NONE", 2, draft_json("smollm2-135m", 2));
  try {
    LLMEngine engine(cfg);
    FAIL() << "a draft with another vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must share the target's tokenizer vocabulary"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gs
