// Every model family through the ModelRunner in NONE and FULL_AND_PIECEWISE: both prompts (one
// longer than the sliding window, prefilled in chunks) decode 48 greedy tokens equal to Hugging
// Face's (fixtures: tests/data/families, made by tools/hf_fixtures/make_family_fixtures.py).
#include <gtest/gtest.h>

#include "model/family_fixtures.h"
#include "runner/model_runner.h"
#include "serving_sim.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

class FamiliesModes : public ::testing::TestWithParam<std::string> {};

TEST_P(FamiliesModes, GreedyEqualsHuggingFaceInNoneAndFullAndPiecewise) {
  const test::FamilyFixture fx = test::load_family_fixture(GetParam());
  std::vector<test::SimRequest> reqs;
  for (size_t i = 0; i < fx.prompts.size(); ++i)
    reqs.push_back(test::greedy_request(fx.prompts[i], int(fx.tokens[i].size()), int(i)));
  for (M mode : {M::NONE, M::FULL_AND_PIECEWISE}) {
    SCOPED_TRACE(mode_name(mode));
    RunnerConfig c;
    c.device = "cpu";
    c.model = test::family_dir(GetParam()).string();
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 32;  // the 52-token prompt prefills in two chunks
    c.kv_cache_memory_bytes = size_t(4) << 20;
    c.compilation.cudagraph_mode = mode;
    c.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16, 32};
    ModelRunner runner(c);
    const test::SimResult res = test::simulate(runner, reqs, 32);
    EXPECT_EQ(res.outputs, fx.tokens);
    if (mode != M::NONE) {
      EXPECT_GT(runner.stats().steps_full, 0u);
      EXPECT_GT(runner.stats().steps_piecewise, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, FamiliesModes, ::testing::ValuesIn(test::family_names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(DeepSeek, FamiliesModes, ::testing::ValuesIn(test::mla_family_names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Fp8, FamiliesModes, ::testing::ValuesIn(test::fp8_family_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gs
