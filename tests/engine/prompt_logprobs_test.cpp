// Prompt logprobs on stories260K against Hugging Face's logits (full_logits_20 golden): every
// prompt token after the first, with its top 5, through chunked prefill, in NONE and
// FULL_AND_PIECEWISE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/llm_engine.h"
#include "golden.h"
#include "test_paths.h"

namespace gs {
namespace {

TEST(PromptLogprobs, EqualHuggingFaceLogSoftmaxThroughChunkedPrefill) {
  const auto golden = test::stories_golden("full_logits_20");
  const auto ids = golden["input_ids"].get<std::vector<int32_t>>();
  const auto logits = golden["logits"].get<std::vector<std::vector<double>>>();
  for (CUDAGraphMode mode : {CUDAGraphMode::NONE, CUDAGraphMode::FULL_AND_PIECEWISE}) {
    SCOPED_TRACE(mode_name(mode));
    EngineConfig cfg;
    cfg.model = test::stories260k_dir().string();
    cfg.device = "cpu";
    cfg.max_num_batched_tokens = 7;  // the 20-token prompt in 3 chunks
    cfg.compilation.cudagraph_mode = mode;
    cfg.compilation.cudagraph_capture_sizes = {1, 2, 4, 8};
    LLMEngine engine(cfg);
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 2;
    p.prompt_logprobs = 5;
    engine.add_request(ids, p);
    std::vector<TokenLogprob> got;
    while (engine.has_unfinished_requests())
      for (auto& o : engine.step()) got.insert(got.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
    ASSERT_EQ(got.size(), ids.size() - 1);
    for (size_t pos = 1; pos < ids.size(); ++pos) {
      const auto& row = logits[pos - 1];
      const double mx = *std::max_element(row.begin(), row.end());
      double sum = 0.0;
      for (double v : row) sum += std::exp(v - mx);
      const double lse = mx + std::log(sum);
      const TokenLogprob& g = got[pos - 1];
      EXPECT_EQ(g.token, ids[pos]);
      EXPECT_NEAR(g.logprob, row[size_t(ids[pos])] - lse, 1e-4) << "position " << pos;
      std::vector<int> order(row.size());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) { return row[a] > row[b]; });
      ASSERT_EQ(g.top.size(), 5u);
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(g.top[k].first, order[k]) << "position " << pos << " rank " << k;
        EXPECT_NEAR(g.top[k].second, row[size_t(order[k])] - lse, 1e-4);
      }
    }
  }
}

}  // namespace
}  // namespace gs
