// Every cudagraph mode serves the same greedy tokens as NONE, on stories260K and a dummy preset,
// for batches of mixed chunked prefill and decode; no graph is ever captured while serving.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "golden.h"
#include "model/family_fixtures.h"
#include "runner/model_runner.h"
#include "serving_sim.h"
#include "test_paths.h"

namespace gs {
namespace {

using M = CUDAGraphMode;
const M kAllModes[] = {M::NONE, M::PIECEWISE, M::FULL, M::FULL_DECODE_ONLY, M::FULL_AND_PIECEWISE};

RunnerConfig small_config(M mode) {
  RunnerConfig c;
  c.device = "cpu";
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 32;
  c.kv_cache_memory_bytes = size_t(8) << 20;
  c.compilation.cudagraph_mode = mode;
  c.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16};
  return c;
}

RunnerConfig stories_config(M mode) {
  RunnerConfig c = small_config(mode);
  c.model = test::stories260k_dir().string();
  return c;
}

struct Golden {
  std::vector<int32_t> input_ids, greedy;
};
Golden load_golden(const std::string& name) {
  const auto j = test::stories_golden(name);
  return {j["input_ids"].get<std::vector<int32_t>>(), j["greedy_output_ids"].get<std::vector<int32_t>>()};
}

// Four prompts arriving over time under a 20-token budget: chunked prefills next to decodes,
// steps above the largest capture size (16) run eagerly, decodes of 3 requests pad to 4.
std::vector<test::SimRequest> stories_workload(int max_new) {
  std::vector<test::SimRequest> reqs;
  int arrival = 0;
  for (const char* name : {"short", "long", "sentence", "digits"}) {
    reqs.push_back(test::greedy_request(load_golden(name).input_ids, max_new, arrival));
    arrival += 3;
  }
  return reqs;
}

// (graphs, runtime-mode steps) must match the mode: sizes {1, 2, 4, 8, 16}, 8 seqs, 6 pieces.
// FULL_AND_PIECEWISE captures piecewise graphs for the sparse ladder {8, 16} only (docs/CUDA_GRAPHS.md §8).
void expect_graph_use(M mode, const RunnerStats& s) {
  const int pieces = 6, sizes = 5, decode_sizes = 4, ladder_sizes = 2;  // uniform decode keys: s <= 8
  const int expected_graphs[] = {0, sizes * pieces, sizes, decode_sizes, ladder_sizes * pieces + decode_sizes};
  EXPECT_EQ(s.num_graphs, expected_graphs[int(mode)]);
  EXPECT_EQ(s.resolved_mode, mode);
  EXPECT_EQ(s.graph_captures_after_startup, 0u);
  EXPECT_GT(s.steps_none + s.steps_piecewise + s.steps_full, 0u);
  EXPECT_EQ(s.steps_full > 0, has_full_cudagraphs(mode));
  EXPECT_EQ(s.steps_piecewise > 0, has_piecewise_cudagraphs(mode));
  EXPECT_GT(s.steps_none, 0u);  // every mode meets a step too big for any graph
  if (mode != M::NONE) {
    EXPECT_GT(s.padded_tokens, 0u);
  }
}

TEST(RunnerAllModes, Stories260KGreedyEqualsNoneAndHuggingFace) {
  const auto reqs = stories_workload(32);
  std::vector<std::vector<int32_t>> reference;
  for (M mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    ModelRunner runner(stories_config(mode));
    const test::SimResult res = test::simulate(runner, reqs, 20);
    if (mode == M::NONE) {
      reference = res.outputs;
      // NONE itself follows the Hugging Face goldens (32 of their 64 greedy tokens).
      const char* names[] = {"short", "long", "sentence", "digits"};
      for (size_t i = 0; i < reqs.size(); ++i) {
        const auto g = load_golden(names[i]).greedy;
        EXPECT_EQ(res.outputs[i], std::vector<int32_t>(g.begin(), g.begin() + 32)) << names[i];
      }
    }
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(res.outputs[i], reference[i]) << "request " << i;
    expect_graph_use(mode, runner.stats());
  }
}

// --kv-cache-dtype fp8: the same KV budget holds a block per byte of a token's K and V element
// (4x the f32 blocks here, 2x bf16's on a GPU), and every mode serves NONE's tokens on it (the graphs replay the
// quantizing cache write and the e4m3 reads).
TEST(RunnerAllModes, Fp8KvCacheSizesBlocksAtAByteAnElementAndEveryModeEqualsNone) {
  const auto reqs = stories_workload(24);
  const int f32_blocks = ModelRunner(stories_config(M::NONE)).num_kv_blocks();
  std::vector<std::vector<int32_t>> reference;
  for (M mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    RunnerConfig c = stories_config(mode);
    c.kv_cache_dtype = "fp8";
    ModelRunner runner(c);
    // f32 on the CPU: a quarter of the bytes a block, so 4x the blocks (each count rounded down)
    EXPECT_GE(runner.num_kv_blocks(), 4 * f32_blocks);
    EXPECT_LT(runner.num_kv_blocks(), 4 * (f32_blocks + 1));
    const test::SimResult res = test::simulate(runner, reqs, 20);
    if (mode == M::NONE) reference = res.outputs;
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(res.outputs[i], reference[i]) << "request " << i;
  }
}

// DeepSeek's latent cache in e4m3 on the deepseek_v2 fixture (multi-head latent attention: the CPU
// backend supports uniform single-token decode graphs only, so FULL modes resolve to their
// piecewise forms for the rest): a block per byte of a token's latent values (4x the f32 blocks),
// and every mode serves NONE's tokens, prompts arriving over time under a 20-token budget.
TEST(RunnerAllModes, DeepseekFp8LatentCacheEveryModeEqualsNone) {
  const test::FamilyFixture fx = test::load_family_fixture("deepseek_v2");
  std::vector<test::SimRequest> reqs;
  for (size_t i = 0; i < fx.prompts.size(); ++i) reqs.push_back(test::greedy_request(fx.prompts[i], 16, 3 * int(i)));
  const auto config = [](M mode, const char* kv) {
    RunnerConfig c = small_config(mode);
    c.model = test::family_dir("deepseek_v2").string();
    c.kv_cache_dtype = kv;
    return c;
  };
  const int f32_blocks = ModelRunner(config(M::NONE, "auto")).num_kv_blocks();
  std::vector<std::vector<int32_t>> reference;
  for (M mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    ModelRunner runner(config(mode, "fp8"));
    EXPECT_GE(runner.num_kv_blocks(), 4 * f32_blocks);
    EXPECT_LT(runner.num_kv_blocks(), 4 * (f32_blocks + 1));
    const test::SimResult res = test::simulate(runner, reqs, 20);
    if (mode == M::NONE) reference = res.outputs;
    EXPECT_EQ(res.outputs, reference);
    EXPECT_EQ(runner.stats().graph_captures_after_startup, 0u);
  }
}

TEST(RunnerAllModes, DummyPresetGreedyEqualsNone) {
  std::vector<test::SimRequest> reqs;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 3 + 7 * i; ++t) prompt.push_back((37 * t + 11 * i + 5) % 512);
    reqs.push_back(test::greedy_request(prompt, 12, i));
  }
  std::vector<std::vector<int32_t>> reference;
  for (M mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    RunnerConfig c = small_config(mode);
    c.load_format = "dummy";
    c.preset = "tiny-qwen3";
    c.seed = 7;
    ModelRunner runner(c);
    const auto res = test::simulate(runner, reqs, 20);
    if (mode == M::NONE) reference = res.outputs;
    EXPECT_EQ(res.outputs, reference);
    EXPECT_EQ(runner.stats().graph_captures_after_startup, 0u);
  }
}

TEST(RunnerAllModes, SeededSamplingEqualsNone) {
  auto reqs = stories_workload(16);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].params.temperature = 0.8f;
    reqs[i].params.top_k = 20;
    reqs[i].params.seed = 42 + i;
  }
  ModelRunner none(stories_config(M::NONE));
  ModelRunner graphs(stories_config(M::FULL_AND_PIECEWISE));
  const auto a = test::simulate(none, reqs, 20), b = test::simulate(graphs, reqs, 20);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_GT(graphs.stats().steps_full, 0u);
  EXPECT_EQ(graphs.stats().graph_captures_after_startup, 0u);
}

TEST(RunnerAllModes, EnforceEagerAndDowngrade) {
  RunnerConfig c = stories_config(M::FULL);
  c.enforce_eager = true;
  ModelRunner eager(c);
  EXPECT_EQ(eager.stats().resolved_mode, M::NONE);
  EXPECT_EQ(eager.stats().num_graphs, 0);
  EXPECT_EQ(eager.device_name(), "cpu");
  EXPECT_EQ(eager.max_model_len(), 512);
}

TEST(RunnerAllModes, MaxModelLenBeyondTheModelIsRefusedWithTheNumberThatFits) {
  for (int len : {513, 268435456, 2147483647}) {
    RunnerConfig c = stories_config(M::NONE);
    c.max_model_len = len;
    try {
      ModelRunner r(c);
      ADD_FAILURE() << len << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("use --max-model-len 512 or less"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gs
