// Non-finite logits on the real stories260K model: a request whose logits turn NaN mid-decode
// fails alone with an error naming the problem, its KV blocks come back, the step's other
// requests give exactly their Hugging Face greedy tokens, and the engine counts the row.
// The NaN comes from engine/nan_logits_executor.h.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "engine/llm_engine.h"
#include "engine/nan_logits_executor.h"
#include "stories260k_goldens.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

using test::kPoisonAt;
using test::kPoisonSeed;
using test::NanLogitsExecutor;

void run(const EngineConfig& cfg) {
  const auto goldens = test::load_stories_goldens();
  auto exec = std::make_unique<NanLogitsExecutor>(make_runner_executor(cfg));
  NanLogitsExecutor* nan = exec.get();
  LLMEngine engine(cfg, std::move(exec), Tokenizer::from_dir(cfg.model));
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = 64;
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < goldens.size(); ++i) {
    which[engine.add_request(goldens[i].input_ids, p)] = i;
    if (i == 1) {  // the marked request runs among the others from the first step
      SamplingParams bad = p;
      bad.seed = kPoisonSeed;
      which[engine.add_request(goldens[0].input_ids, bad)] = goldens.size();
    }
  }
  std::map<RequestId, std::vector<int32_t>> ids;
  std::map<RequestId, RequestOutput> last;
  while (engine.has_unfinished_requests())
    for (const auto& o : engine.step()) {
      ids[o.id].insert(ids[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) last[o.id] = o;
    }
  for (auto& [id, i] : which) {
    if (i == goldens.size()) {
      EXPECT_EQ(last[id].finish_reason, FinishReason::Abort);
      EXPECT_EQ(last[id].error, "the model produced non-finite logits (NaN/Inf) for this request");
      const std::vector<int32_t> before(goldens[0].output_ids.begin(), goldens[0].output_ids.begin() + kPoisonAt);
      EXPECT_EQ(ids[id], before) << "the tokens before its logits broke, and no <unk> after";
      continue;
    }
    EXPECT_EQ(ids[id], goldens[i].output_ids) << goldens[i].name;
    EXPECT_EQ(last[id].finish_reason, FinishReason::Length) << goldens[i].name;
    EXPECT_TRUE(last[id].error.empty()) << goldens[i].name;
  }
  EXPECT_GT(nan->poisoned_in_batch, 0) << "the NaN row never shared a step with other requests";
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.non_finite_logits, 1u);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(NonFiniteLogits, TheRequestFailsAloneAndTheOthersMatchGoldens) { run(test::stories_config()); }

TEST(NonFiniteLogits, TheSameInsideGraphs) {
  EngineConfig cfg = test::stories_config();
  cfg.enforce_eager = false;
  cfg.compilation.apply_json(R"({"cudagraph_mode": "FULL_AND_PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4, 8]})");
  run(cfg);
}

}  // namespace
}  // namespace gs
