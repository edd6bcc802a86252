// The runner latency benchmark on the CPU: decode steps through FULL graphs, and its quantiles.
#include <gtest/gtest.h>

#include <vector>

#include "bench/latency_bench.h"
#include "core/error.h"
#include "test_paths.h"

namespace gs {
namespace {

// stories260K on the CPU through FULL_AND_PIECEWISE graphs (the CPU default is NONE).
RunnerConfig stories_config(int max_num_seqs, int max_num_batched_tokens, std::vector<int> capture_sizes) {
  RunnerConfig c;
  c.device = "cpu";
  c.model = test::stories260k_dir().string();
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.kv_cache_memory_bytes = size_t(4) << 20;
  c.compilation.cudagraph_mode = CUDAGraphMode::FULL_AND_PIECEWISE;
  c.compilation.cudagraph_capture_sizes = std::move(capture_sizes);
  return c;
}

// 3 requests of 10 tokens prefilled in chunks of 8, 5 output tokens, 2 iterations after a warm-up.
LatencyBenchOptions three_requests() {
  return {.batch_size = 3,
          .input_len = 10,
          .output_len = 5,
          .num_iters = 2,
          .num_warmup_iters = 1,
          .max_num_batched_tokens = 8};
}

TEST(LatencyBench, DecodeStepsRunThroughFullGraphs) {
  ModelRunner runner(stories_config(4, 16, {1, 2, 4, 8}));
  LatencyBenchOptions o = three_requests();
  int begins = 0, ends = 0;
  o.on_decode_begin = [&] { EXPECT_EQ(begins++, ends); };
  o.on_decode_end = [&] { EXPECT_EQ(++ends, begins); };
  std::vector<uint64_t> prefill_steps;  // steps between each on_prefill_begin and its on_prefill_end
  o.on_prefill_begin = [&] { prefill_steps.push_back(runner.stats().steps_piecewise); };
  o.on_prefill_end = [&] { prefill_steps.back() = runner.stats().steps_piecewise - prefill_steps.back(); };
  const LatencyResult r = run_latency_bench(runner, o);
  EXPECT_EQ(begins, 2);  // around the decode steps of each measured iteration, not the warm-up
  EXPECT_EQ(ends, 2);
  // ... and around each measured prefill: 30 prompt tokens in chunks of 8.
  EXPECT_EQ(prefill_steps, (std::vector<uint64_t>{4, 4}));
  EXPECT_EQ(r.decode_ms.size(), size_t(2 * 4));  // (output_len - 1) steps per measured iteration
  EXPECT_GT(r.prefill_ms, 0.0);
  EXPECT_LE(r.decode_ms_median, r.decode_ms_p90);
  const RunnerStats s = runner.stats();
  EXPECT_EQ(s.steps_full, uint64_t(3 * 4));  // every decode step of 3 requests: FULL graph of size 4
  EXPECT_GT(s.steps_piecewise, 0u);          // prefill chunks of <= 8 tokens
  EXPECT_EQ(s.graph_captures_after_startup, 0u);
  o.input_len = 600;
  EXPECT_THROW(run_latency_bench(runner, o), Error);  // beyond max_model_len
}

// prefill_once (bench graphs): the prompts' prefill chunks run in the first iteration alone, every
// iteration decodes the same FULL steps from the rewound state, and prefill_ms is that one prefill's
// although it was a warm-up.
TEST(LatencyBench, PrefillOnceRewindsToThePrompt) {
  LatencyBenchOptions o = three_requests();
  std::vector<RunnerStats> stats;
  for (bool once : {false, true}) {
    ModelRunner runner(stories_config(4, 16, {1, 2, 4, 8}));
    o.prefill_once = once;
    const LatencyResult r = run_latency_bench(runner, o);
    EXPECT_GT(r.prefill_ms, 0.0);
    EXPECT_EQ(r.decode_ms.size(), size_t(2 * 4));
    stats.push_back(runner.stats());
  }
  EXPECT_EQ(stats[0].steps_full, uint64_t(3 * 4));  // decode steps of every iteration, either way
  EXPECT_EQ(stats[1].steps_full, uint64_t(3 * 4));
  EXPECT_GT(stats[1].steps_piecewise, 0u);
  EXPECT_EQ(stats[0].steps_piecewise, 3 * stats[1].steps_piecewise);  // one prefill of the three
}

// A shared, already computed prefix: 8 requests decode over the same 256 tokens' blocks, so every
// decode step cascades (PIECEWISE, never FULL); the same run without cascade replays FULL graphs.
TEST(LatencyBench, SharedPrefixDecodesWithCascadeAttention) {
  RunnerConfig c = stories_config(8, 64, {1, 2, 4, 8, 16, 32, 64});
  LatencyBenchOptions o{.batch_size = 8,
                        .input_len = 6,
                        .output_len = 4,
                        .num_iters = 1,
                        .num_warmup_iters = 0,
                        .max_num_batched_tokens = 64};
  o.shared_prefix_len = 256;
  for (bool disable : {false, true}) {
    c.disable_cascade_attn = disable;
    ModelRunner runner(c);
    run_latency_bench(runner, o);
    const RunnerStats s = runner.stats();
    EXPECT_EQ(s.steps_cascade, disable ? 0u : 1u + 3u) << "the own-token prefill and every decode step";
    EXPECT_EQ(s.steps_full, disable ? 3u : 0u);
    EXPECT_EQ(s.graph_captures_after_startup, 0u);
    o.shared_prefix_len = 250;
    EXPECT_THROW(run_latency_bench(runner, o), Error);  // not whole blocks
    o.shared_prefix_len = 256;
  }
}

// The untimed pass over the shared prefix ends with a step that samples (its token dropped): a
// step that samples nothing returns before the GPU has run it, and the prefix's work would be timed
// as the cached prefill. A recording model: every step before the timed prefill, and what it samples.
TEST(LatencyBench, SharedPrefixPassSynchronisesBeforeTheTimer) {
  std::vector<SchedulerOutput> steps;
  std::vector<std::vector<int32_t>> tokens;  // request 0's tokens as each step saw them
  BenchModel m{[&](const SchedulerOutput& so) {
                 steps.push_back(so);
                 tokens.push_back(*so.requests.at(0).all_token_ids);
                 RunnerOutput out;
                 for (const auto& r : so.requests)
                   if (r.sample) out.sampled.push_back(SampledToken{{5, 0.0f, {}}, r.id});
                 return out;
               },
               [] { return RunnerStats{}; },
               512,
               16,
               64,
               100};
  LatencyBenchOptions o{.batch_size = 2,
                        .input_len = 8,
                        .output_len = 2,
                        .num_iters = 1,
                        .num_warmup_iters = 0,
                        .max_num_batched_tokens = 20};
  o.shared_prefix_len = 32;
  run_latency_bench(m, o);
  // Prefix pass: request 0 alone, 20 + 12 tokens, the last step sampling at the prefix's end.
  ASSERT_GE(steps.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(steps[i].requests.size(), 1u) << i;
    EXPECT_EQ(steps[i].requests[0].id, 0u);
    EXPECT_EQ(steps[i].requests[0].sample, i == 1) << i;
  }
  EXPECT_EQ(steps[1].requests[0].num_computed_tokens + steps[1].requests[0].num_new_tokens, 32);
  // The dropped token: the timed prefill sees the prompt unchanged (32 + 8 tokens) and samples it.
  EXPECT_EQ(tokens[2].size(), 40u);
  EXPECT_EQ(steps[2].requests[0].num_computed_tokens, 32);
  EXPECT_TRUE(steps[2].requests[0].sample);
}

TEST(LatencyBench, Quantiles) {
  EXPECT_EQ(quantile({}, 0.5), 0.0);
  EXPECT_EQ(quantile({4, 1, 3, 2}, 0.5), 2.0);
  EXPECT_EQ(quantile({4, 1, 3, 2}, 0.9), 4.0);
  EXPECT_EQ(quantile({5}, 0.9), 5.0);
}

}  // namespace
}  // namespace gs
