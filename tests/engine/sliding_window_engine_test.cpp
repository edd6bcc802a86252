// Sliding-window KV reclamation on the real engine (CPU): a window-only model (the Mistral
// fixture, window 24) keeps its KV block count bounded while generating far past the window,
// with greedy tokens still equal to Hugging Face's; a full-attention model keeps every block.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/llm_engine.h"
#include "model/family_fixtures.h"

namespace gs {
namespace {

EngineConfig fixture_config(const std::string& family) {
  EngineConfig cfg;
  cfg.model = test::family_dir(family).string();
  cfg.device = "cpu";
  cfg.block_size = 4;
  cfg.max_num_seqs = 4;
  cfg.max_num_batched_tokens = 32;  // the long prompt is prefilled in chunks
  cfg.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  return cfg;
}

struct WindowRun {
  std::map<RequestId, std::vector<int32_t>> tokens;
  int max_used_late = 0;  // most blocks in use once every prompt is computed
};

WindowRun generate(LLMEngine& engine, const std::vector<std::vector<int32_t>>& prompts, int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  for (const auto& prompt : prompts) engine.add_request(prompt, p);
  WindowRun run;
  int step = 0;
  while (engine.has_unfinished_requests()) {
    for (const auto& o : engine.step())
      run.tokens[o.id].insert(run.tokens[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
    const EngineStats s = engine.stats();
    if (++step > 8) run.max_used_late = std::max(run.max_used_late, s.kv_blocks_total - s.kv_blocks_free);
  }
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total) << "every block comes back at the end";
  return run;
}

TEST(SlidingWindowKv, WindowOnlyModelStaysBoundedAndMatchesHf) {
  const auto fx = test::load_family_fixture("mistral_swa");
  LLMEngine engine(fixture_config("mistral_swa"));
  const int steps = static_cast<int>(fx.tokens[0].size());
  const WindowRun run = generate(engine, fx.prompts, steps);
  size_t i = 0;
  for (const auto& [id, toks] : run.tokens) EXPECT_EQ(toks, fx.tokens[i++]) << "prompt " << i;
  // Window 24 in blocks of 4: at most 7 blocks hold the window plus the block being written.
  EXPECT_LE(run.max_used_late, 2 * 8);
}

TEST(SlidingWindowKv, LongGenerationUsesAConstantNumberOfBlocks) {
  const auto fx = test::load_family_fixture("mistral_swa");
  LLMEngine engine(fixture_config("mistral_swa"));
  const WindowRun run = generate(engine, {fx.prompts[0]}, 200);  // 8x the window
  const auto& toks = run.tokens.begin()->second;
  ASSERT_EQ(toks.size(), 200u);
  EXPECT_TRUE(std::equal(fx.tokens[0].begin(), fx.tokens[0].end(), toks.begin())) << "HF's first tokens";
  EXPECT_LE(run.max_used_late, 8) << "213 tokens would need 54 blocks without reclamation";
}

TEST(SlidingWindowKv, FullAttentionModelKeepsEveryBlock) {
  const auto fx = test::load_family_fixture("llama");
  LLMEngine engine(fixture_config("llama"));
  const int prompt = static_cast<int>(fx.prompts[0].size());
  const WindowRun run = generate(engine, {fx.prompts[0]}, 100);
  EXPECT_EQ(run.max_used_late, (prompt + 100 - 1 + 3) / 4);
}

}  // namespace
}  // namespace gs
