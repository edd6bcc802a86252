// Cascade attention on the real engine (CPU, stories260K): requests that share a cached system
// prompt decode and prefill (in chunks, with preemption) with the prefix run once per batch; every
// token and top-5 logprob equals the engine's with --disable-cascade-attn, cascade steps never
// replay a FULL graph and nothing is captured after start-up.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/llm_engine.h"
#include "stories260k_goldens.h"

namespace gs {
namespace {

std::vector<int32_t> tokens(int n, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = 3 + int32_t((x >> 8) % 509u);
  }
  return t;
}

struct EngineRun {
  std::map<size_t, std::vector<TokenLogprob>> out;  // by job
  EngineStats stats;
};

// The system prompt alone first (its blocks are cached), then every job at once.
EngineRun run(const EngineConfig& cfg, const std::vector<int32_t>& sys, const std::vector<std::vector<int32_t>>& jobs) {
  LLMEngine e(cfg);
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = 2;
  e.add_request(sys, p);
  while (e.has_unfinished_requests()) e.step();
  p.max_tokens = 12;
  p.logprobs = 5;
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < jobs.size(); ++i) which[e.add_request(jobs[i], p)] = i;
  EngineRun r;
  while (e.has_unfinished_requests())
    for (const auto& o : e.step()) {
      auto& v = r.out[which.at(o.id)];
      v.insert(v.end(), o.logprobs.begin(), o.logprobs.end());
    }
  r.stats = e.stats();
  return r;
}

// (shared prefix tokens, KV blocks beyond the prefix's: too few for every request, so some are
// preempted, yet enough for 8 requests at a time, the heuristic's minimum).
class CascadeEngine : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(CascadeEngine, SameTokensAndLogprobsAsWithout) {
  const auto [prefix, own_blocks] = GetParam();
  EngineConfig cfg = test::stories_config();
  cfg.enforce_eager = false;
  cfg.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  cfg.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16, 32};
  cfg.enable_prefix_caching = true;
  cfg.max_num_seqs = 8;
  cfg.max_num_batched_tokens = 40;  // the requests' own parts are prefilled in chunks
  cfg.kv_cache_memory_bytes = size_t(1280) * 16 * size_t(prefix / 16 + own_blocks);
  const auto sys = tokens(prefix, 1);
  std::vector<std::vector<int32_t>> jobs;
  for (uint32_t i = 0; i < 9; ++i) {
    auto j = sys;
    const auto own = tokens(3 + int(i) * 4, 100 + i);
    j.insert(j.end(), own.begin(), own.end());
    jobs.push_back(j);
  }
  EngineConfig off = cfg;
  off.disable_cascade_attn = true;
  const EngineRun with = run(cfg, sys, jobs), without = run(off, sys, jobs);
  EXPECT_GT(with.stats.graphs.steps_cascade, 0u);
  EXPECT_EQ(without.stats.graphs.steps_cascade, 0u);
  EXPECT_GT(with.stats.num_preemptions, 0);
  EXPECT_EQ(with.stats.graphs.graph_captures_after_startup, 0u);
  // Cascade steps run PIECEWISE: the 8-request decode steps that replay FULL graphs without cascade.
  EXPECT_LT(with.stats.graphs.steps_full, without.stats.graphs.steps_full);
  ASSERT_EQ(with.out.size(), jobs.size());
  for (const auto& [job, want] : without.out) {
    const auto& got = with.out.at(job);
    ASSERT_EQ(got.size(), want.size()) << "job " << job;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].token, want[i].token) << "job " << job << " token " << i;
      ASSERT_EQ(got[i].top.size(), want[i].top.size());
      for (size_t k = 0; k < want[i].top.size(); ++k) {
        EXPECT_EQ(got[i].top[k].first, want[i].top[k].first);
        // Cascade sums the prefix's and the request's keys apart and merges the two softmaxes: the
        // same value up to float rounding, which the compiler's choices move by a few 1e-5.
        EXPECT_NEAR(got[i].top[k].second, want[i].top[k].second, 1e-4) << "job " << job << " token " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PrefixLengths, CascadeEngine,
                         ::testing::Values(std::pair{256, 14}, std::pair{300, 20}, std::pair{416, 14}));

}  // namespace
}  // namespace gs
