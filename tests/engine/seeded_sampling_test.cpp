// A seeded sampled request (top-k, top-p, penalties, logit_bias, min_tokens) on stories260K
// produces the same tokens alone and among 64 other requests that force preemption and the
// lending of penalty slots, in every graph mode.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/llm_engine.h"
#include "test_paths.h"

namespace gs {
namespace {

EngineConfig config(int max_num_seqs, size_t kv_bytes, CUDAGraphMode mode) {
  EngineConfig cfg;
  cfg.model = test::stories260k_dir().string();
  cfg.device = "cpu";
  cfg.max_num_seqs = max_num_seqs;
  cfg.max_num_batched_tokens = 64;
  cfg.kv_cache_memory_bytes = kv_bytes;
  cfg.compilation.cudagraph_mode = mode;
  cfg.compilation.cudagraph_capture_sizes = {1, 2, 4, 8};
  return cfg;
}

SamplingParams seeded() {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.9f;
  p.top_k = 40;
  p.seed = 1234;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.3f;
  p.logit_bias = {{5, 2.0f}, {17, -3.0f}};
  p.min_tokens = 4;
  p.max_tokens = 48;
  p.ignore_eos = true;
  return p;
}

// The seeded request's tokens, submitted after `others` unseeded requests of mixed parameters.
std::vector<int32_t> run(const EngineConfig& cfg, int others, int* preemptions) {
  LLMEngine engine(cfg);
  std::mt19937 rng(5);
  for (int i = 0; i < others; ++i) {
    SamplingParams p;
    p.temperature = i % 3 == 0 ? 0.0f : 1.0f;
    p.top_p = i % 2 ? 0.8f : 1.0f;
    p.frequency_penalty = i % 4 == 1 ? 0.5f : 0.0f;  // competes for penalty slots
    p.max_tokens = 8 + i % 12;
    p.ignore_eos = true;
    std::vector<int32_t> prompt(static_cast<size_t>(5 + i % 20));
    for (auto& t : prompt) t = int32_t(rng() % 500) + 3;
    engine.add_request(prompt, p);
  }
  const RequestId mine = engine.add_request(std::vector<int32_t>{1, 403, 407, 261, 378, 299, 430}, seeded());
  std::vector<int32_t> tokens;
  while (engine.has_unfinished_requests())
    for (const auto& o : engine.step())
      if (o.id == mine) tokens.insert(tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  *preemptions = engine.stats().num_preemptions;
  return tokens;
}

TEST(SeededSampling, SameTokensAloneCrowdedPreemptedAndInEveryGraphMode) {
  int preemptions = 0;
  const auto alone = run(config(8, 8u << 20, CUDAGraphMode::NONE), 0, &preemptions);
  ASSERT_EQ(alone.size(), 48u);
  for (CUDAGraphMode mode : {CUDAGraphMode::NONE, CUDAGraphMode::PIECEWISE, CUDAGraphMode::FULL_AND_PIECEWISE}) {
    SCOPED_TRACE(mode_name(mode));
    // 12 blocks of 16 tokens: far less than the requests need, so requests are preempted.
    EXPECT_EQ(run(config(8, 1280 * 16 * 12, mode), 64, &preemptions), alone);
    EXPECT_GT(preemptions, 0);
  }
}

// Degenerate parameters in the middle of 16 ordinary requests: each gets a defined result (the
// greedy token where that is what they mean) and every other request finishes normally.
TEST(SeededSampling, DegenerateParametersNeverPoisonABatch) {
  LLMEngine engine(config(32, 8u << 20, CUDAGraphMode::FULL_AND_PIECEWISE));
  const std::vector<int32_t> prompt{1, 403, 407, 261, 378};
  SamplingParams normal;
  normal.max_tokens = 12;
  normal.ignore_eos = true;
  SamplingParams greedy = normal;
  greedy.temperature = 0.0f;
  SamplingParams tiny_t = normal, tiny_p = normal, all_biased = normal;
  tiny_t.temperature = 1e-40f;
  tiny_t.top_k = 5;
  tiny_p.top_p = 1e-9f;
  for (int t = 0; t < engine.model_config().vocab_size; ++t) all_biased.logit_bias.emplace_back(t, -100.0f);
  std::vector<RequestId> ordinary;
  for (int i = 0; i < 16; ++i) ordinary.push_back(engine.add_request(prompt, normal));
  const RequestId g = engine.add_request(prompt, greedy), a = engine.add_request(prompt, tiny_t),
                  b = engine.add_request(prompt, tiny_p), c = engine.add_request(prompt, all_biased);
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, FinishReason> reason;
  while (engine.has_unfinished_requests())
    for (const auto& o : engine.step()) {
      tokens[o.id].insert(tokens[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) reason[o.id] = o.finish_reason;
    }
  for (RequestId id : ordinary) EXPECT_EQ(reason[id], FinishReason::Length);
  EXPECT_EQ(tokens[a], tokens[g]) << "temperature 1e-40 is greedy";
  EXPECT_EQ(tokens[b], tokens[g]) << "top_p 1e-9 keeps only the top token";
  EXPECT_EQ(reason[c], FinishReason::Length);
  EXPECT_EQ(tokens[c].size(), 12u);
}

}  // namespace
}  // namespace gs
