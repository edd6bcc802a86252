// The whole engine on the real stories260K model: every golden prompt at once, through a KV
// cache so small that requests are preempted and prefills chunked, must give exactly the
// Hugging Face greedy tokens and text of each prompt alone.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "stories260k_goldens.h"

namespace gs {
namespace {

using test::Golden;
using test::stories_config;
std::vector<Golden> load_goldens() { return test::load_stories_goldens(); }

void check_against_goldens(const EngineConfig& cfg, bool expect_preemption) {
  const auto goldens = load_goldens();
  LLMEngine engine(cfg);
  ASSERT_LE(engine.stats().kv_blocks_total, 16);
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = 64;
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < goldens.size(); ++i) which[engine.add_request(goldens[i].input_ids, p)] = i;
  std::map<RequestId, std::vector<int32_t>> ids;
  std::map<RequestId, std::string> text;
  while (engine.has_unfinished_requests())
    for (const auto& o : engine.step()) {
      ids[o.id].insert(ids[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      text[o.id] += o.new_text;
      if (o.finished) {
        EXPECT_EQ(o.finish_reason, FinishReason::Length);
      }
    }
  for (auto& [id, i] : which) {
    const Golden& g = goldens[i];
    EXPECT_EQ(ids[id], g.output_ids) << g.name;
    if (g.full_text.rfind(g.prompt, 0) == 0) {
      EXPECT_EQ(text[id], g.full_text.substr(g.prompt.size())) << g.name;
    }
  }
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  if (expect_preemption) {
    EXPECT_GT(s.num_preemptions, 0);
  }
}

TEST(Stories260KEngine, BatchedPreemptedChunkedMatchesGoldens) {
  check_against_goldens(stories_config(), /*expect_preemption=*/true);
}

TEST(Stories260KEngine, GraphModesMatchGoldens) {
  EngineConfig cfg = stories_config();
  cfg.enforce_eager = false;
  cfg.compilation.apply_json(R"({"cudagraph_mode": "FULL_AND_PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4, 8]})");
  check_against_goldens(cfg, /*expect_preemption=*/true);
}

TEST(Stories260KEngine, TextPromptAndErrors) {
  EngineConfig cfg = stories_config();
  LLMEngine engine(cfg);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 64;
  p.stop = {"Lily"};
  RequestId id = engine.add_request(std::string("Once upon a time"), p);
  std::string text;
  RequestOutput last;
  while (engine.has_unfinished_requests())
    for (auto& o : engine.step()) {
      text += o.new_text;
      if (o.finished) last = o;
    }
  EXPECT_EQ(last.id, id);
  EXPECT_EQ(text, ", there was a little girl named ");
  EXPECT_EQ(last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(last.stop_reason, "Lily");
  EXPECT_THROW(engine.add_request(std::string(), p), Error);
  EXPECT_THROW(engine.add_request(std::vector<int32_t>(engine.max_model_len(), 1), p), Error);
  EngineConfig bad = cfg;
  bad.model = "/nonexistent/model";
  EXPECT_THROW(LLMEngine{bad}, Error);
}

}  // namespace
}  // namespace gs

namespace gs {
namespace {

// Prefix caching on the real model: a second wave repeating the first wave's prompts (and
// one extended prompt) reuses cached blocks and still gives exactly the golden tokens.
TEST(Stories260KEngine, PrefixCachingMatchesGoldens) {
  EngineConfig cfg = stories_config();
  cfg.enable_prefix_caching = true;
  cfg.kv_cache_memory_bytes = 1280 * 16 * 24;
  const auto goldens = load_goldens();
  LLMEngine engine(cfg);
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = 64;
  for (int wave = 0; wave < 2; ++wave) {
    std::map<RequestId, size_t> which;
    for (size_t i = 0; i < goldens.size(); ++i) which[engine.add_request(goldens[i].input_ids, p)] = i;
    std::map<RequestId, std::vector<int32_t>> ids;
    while (engine.has_unfinished_requests())
      for (const auto& o : engine.step())
        ids[o.id].insert(ids[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
    for (auto& [id, i] : which) EXPECT_EQ(ids[id], goldens[i].output_ids) << goldens[i].name << " wave " << wave;
  }
  const EngineStats s = engine.stats();
  EXPECT_GT(s.prefix_cache_hit_tokens, 0u);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

}  // namespace
}  // namespace gs
