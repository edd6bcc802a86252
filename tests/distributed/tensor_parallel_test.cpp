// Tensor parallelism on the CPU: TP = 2 and 4 give TP = 1's greedy tokens and logits (through
// the sampled tokens' top-20 logprobs) on stories260K (8 heads, 4 KV heads) in every graph mode,
// on dummy presets whose KV heads are split or replicated, and on gpt-oss's and DeepSeek's HF
// fixtures; so does expert parallelism (whole experts a rank) on every MoE family's fixture and on
// experts that do not divide by the ranks; with LoRA adapters on every projection of stories260K (two adapters and the
// base model in one batch) and attention adapters on gpt-oss's and qwen3_moe's fixtures, TP = 2 and 4 equal TP = 1 too;
// shards of dummy weights are slices of the whole tensors; models that do not split are refused with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/lora_test_util.h"
#include "golden.h"
#include "model/family_fixtures.h"
#include "model/weight_source.h"
#include "test_paths.h"
#include "tp_harness.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

RunnerConfig config(M mode) {
  RunnerConfig c;
  c.device = "cpu";
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 32;
  c.kv_cache_memory_bytes = size_t(8) << 20;
  c.compilation.cudagraph_mode = mode;
  c.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16};
  return c;
}

std::vector<int32_t> golden_prompt(const std::string& name) {
  return test::stories_golden(name)["input_ids"].get<std::vector<int32_t>>();
}

// Greedy requests with their top-20 logprobs: chunked prefill next to decodes, then decode.
std::vector<test::SimRequest> workload(const std::vector<std::vector<int32_t>>& prompts, int max_new) {
  std::vector<test::SimRequest> reqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs.push_back(test::greedy_request(prompts[i], max_new, int(2 * i)));
    reqs.back().params.logprobs = 20;
  }
  return reqs;
}

// Logprobs within tol relative to their size (|lp| reaches ~20 here; f32 sums in another order
// differ by a few ulps there, and 200 steps of KV built from them accumulate ~1e-5 absolute).
void expect_close(const test::SimResult& a, const test::SimResult& ref, float tol) {
  ASSERT_EQ(a.outputs, ref.outputs);
  ASSERT_EQ(a.logprobs.size(), ref.logprobs.size());
  for (size_t r = 0; r < ref.logprobs.size(); ++r) {
    ASSERT_EQ(a.logprobs[r].size(), ref.logprobs[r].size());
    float worst = 0.0f;
    for (size_t i = 0; i < ref.logprobs[r].size(); ++i)
      worst = std::max(
          worst, std::fabs(a.logprobs[r][i] - ref.logprobs[r][i]) / std::max(1.0f, std::fabs(ref.logprobs[r][i])));
    EXPECT_LE(worst, tol) << "request " << r;
  }
}

// TP 2 and 4 (with c's other settings) equal `ref` within 1e-5, capturing no graph after start-up.
void expect_tp2_and_tp4_equal(const RunnerConfig& c, const std::vector<test::SimRequest>& reqs, int token_budget,
                              const test::SimResult& ref) {
  for (int tp : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    RunnerStats stats;
    expect_close(test::simulate_tp(c, tp, reqs, token_budget, &stats), ref, 1e-5f);
    EXPECT_EQ(stats.graph_captures_after_startup, 0u);
  }
}

TEST(TensorParallel, Stories260KEqualsTp1InEveryGraphMode) {
  const auto reqs = workload({golden_prompt("short"), golden_prompt("long"), golden_prompt("digits")}, 200);
  for (M mode : {M::NONE, M::PIECEWISE, M::FULL, M::FULL_AND_PIECEWISE}) {
    SCOPED_TRACE(mode_name(mode));
    RunnerConfig c = config(mode);
    c.model = test::stories260k_dir().string();
    RunnerStats stats;
    const test::SimResult ref = test::simulate_tp(c, 1, reqs, 24);
    ASSERT_EQ(ref.outputs[0].size(), 200u);
    for (int tp : {2, 4}) {
      SCOPED_TRACE("tp " + std::to_string(tp));
      expect_close(test::simulate_tp(c, tp, reqs, 24, &stats), ref, 1e-5f);
      EXPECT_EQ(stats.graph_captures_after_startup, 0u);
      EXPECT_EQ(stats.steps_full > 0, has_full_cudagraphs(mode));
      EXPECT_EQ(stats.steps_piecewise > 0, has_piecewise_cudagraphs(mode));
    }
  }
}

// tiny-qwen2: 4 heads, 2 KV heads (split at TP 2, replicated at TP 4), q/k/v biases, an untied
// lm_head; tiny-qwen3: q/k norms; tiny-qwen3-moe: 16 experts (top 4) sharded on their channels.
// Vocabulary 512.
TEST(TensorParallel, DummyPresetsSplitOrReplicateKvHeads) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    prompts.emplace_back();
    for (int t = 0; t < 5 + 9 * i; ++t) prompts.back().push_back((37 * t + 11 * i + 5) % 512);
  }
  const auto reqs = workload(prompts, 24);
  for (const char* preset : {"tiny-qwen2", "tiny-qwen3", "tiny-qwen3-moe"}) {
    SCOPED_TRACE(preset);
    RunnerConfig c = config(M::FULL_AND_PIECEWISE);
    c.load_format = "dummy";
    c.preset = preset;
    c.seed = 3;
    const test::SimResult ref = test::simulate_tp(c, 1, reqs, 16);
    for (int tp : {2, 4}) expect_close(test::simulate_tp(c, tp, reqs, 16), ref, 1e-5f);
  }
}

// gpt-oss's HF fixture: sinks split by head, o_proj's and the experts' down biases added by rank 0
// alone (the all-reduce sums the ranks' partials), the interleaved gate/up split on the experts'
// channels (40: 20 or 10 a rank), 2 KV heads split at TP 2 and replicated at TP 4.
TEST(TensorParallel, GptOssFixtureEqualsTp1) {
  const auto reqs = workload(test::load_family_fixture("gpt_oss").prompts, 24);
  RunnerConfig c = config(M::FULL_AND_PIECEWISE);
  c.model = test::family_dir("gpt_oss").string();
  const test::SimResult ref = test::simulate_tp(c, 1, reqs, 16);
  for (int tp : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    expect_close(test::simulate_tp(c, tp, reqs, 16), ref, 1e-5f);
  }
}

// DeepSeek's HF fixtures (multi-head latent attention with 4 heads: 2 or 1 a rank, the latent
// cached whole on each; the dense first layer's MLP, the routed experts (width 24) and the shared
// experts split on their channels; V2's group-limited softmax routing, V3's sigmoid scores with
// the correction bias, q_lora_rank on deepseek_v2_qlora and V3): TP 2 and 4 equal TP 1.
TEST(TensorParallel, DeepseekFixturesEqualTp1) {
  for (const char* fixture : {"deepseek_v2", "deepseek_v2_qlora", "deepseek_v3"}) {
    SCOPED_TRACE(fixture);
    const auto reqs = workload(test::load_family_fixture(fixture).prompts, 24);
    RunnerConfig c = config(M::FULL_AND_PIECEWISE);
    c.model = test::family_dir(fixture).string();
    const test::SimResult ref = test::simulate_tp(c, 1, reqs, 16);
    for (int tp : {2, 4}) {
      SCOPED_TRACE("tp " + std::to_string(tp));
      expect_close(test::simulate_tp(c, tp, reqs, 16), ref, 1e-5f);
    }
  }
}

// Two PEFT adapters on q/k/v/o/gate/up/down of every layer (rank 4, and rank 8 rsLoRA) and the
// base model in one batch, chunked prefill beside decodes: TP 2 and 4 (each rank holding lora_B's
// rows of q/k/v/gate/up and lora_A's columns of o/down) give TP 1's greedy tokens, and the top-20
// logprobs of each within 1e-5 relative, the bound the base model meets (the same sums in another
// order; the model with such an adapter merged into its weights drifts ~3e-6 between TP 1 and 2).
// The adapters' values (+-0.05) change every adapted request's tokens, so the comparison sees
// them, yet keep the model as well conditioned as the base: at +-0.3 the merged model alone drifts
// 2e-4 between TP 1 and 2. A term added on every rank before the all-reduce would be 2 or 4 times
// too large, far beyond the bound.
TEST(TensorParallel, LoraAdaptersOnEveryProjectionEqualTp1) {
  test::TempDir tmp;
  test::write_adapter(tmp.path() / "a",
                      test::AdapterSpec{.rank = 4, .alpha = 8, .seed = 7, .a_range = 0.05f, .b_range = 0.05f});
  test::write_adapter(
      tmp.path() / "b",
      test::AdapterSpec{.rank = 8, .alpha = 16, .rslora = true, .seed = 11, .a_range = 0.05f, .b_range = 0.05f});
  std::vector<test::SimRequest> reqs =
      workload({golden_prompt("short"), golden_prompt("long"), golden_prompt("digits"), golden_prompt("short")}, 64);
  const int lora_of[] = {1, 2, 0, 2};
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].lora_id = lora_of[i];
  reqs[3].arrival_step = 5;
  for (M mode : {M::NONE, M::FULL_AND_PIECEWISE}) {
    SCOPED_TRACE(mode_name(mode));
    RunnerConfig c = config(mode);
    c.model = test::stories260k_dir().string();
    const test::SimResult base = test::simulate_tp(c, 1, reqs, 24);  // no LoRA: every lora_id ignored
    c.enable_lora = true;
    c.max_loras = 2;
    c.max_lora_rank = 8;
    c.lora_modules = {{"a", (tmp.path() / "a").string()}, {"b", (tmp.path() / "b").string()}};
    const test::SimResult ref = test::simulate_tp(c, 1, reqs, 24);
    for (size_t i = 0; i < reqs.size(); ++i)
      if (lora_of[i] != 0) {
        EXPECT_NE(ref.outputs[i], base.outputs[i]) << "request " << i << ": the adapter must matter";
      }
    EXPECT_EQ(ref.outputs[2], base.outputs[2]) << "the base model's request";
    expect_tp2_and_tp4_equal(c, reqs, 24, ref);
  }
}

// Mixture-of-experts models take attention adapters only (load_lora_adapter's refusals), under
// tensor parallelism too: on gpt-oss's fixture (o_proj's bias added by rank 0 alone, the adapter's
// o term by every rank on its columns) and qwen3_moe's (a sparse and a dense layer), TP 2 and 4,
// experts split on their width or whole (--enable-expert-parallel), with a q/k/v/o adapter equal
// TP 1, which the adapter changes.
TEST(TensorParallel, MixtureOfExpertsAttentionAdaptersEqualTp1) {
  for (const char* family : {"gpt_oss", "qwen3_moe"}) {
    SCOPED_TRACE(family);
    test::TempDir tmp;
    const ModelConfig mc = load_model_config(test::family_dir(family));
    test::write_adapter(tmp.path() / "attn",
                        test::AdapterSpec{.rank = 4,
                                          .alpha = 8,
                                          .targets = {"q_proj", "k_proj", "v_proj", "o_proj"},
                                          .seed = 5,
                                          .a_range = 0.05f,
                                          .b_range = 0.05f},
                        mc.num_layers, mc);
    auto reqs = workload(test::load_family_fixture(family).prompts, 24);
    for (auto& r : reqs) r.lora_id = 1;
    RunnerConfig c = config(M::FULL_AND_PIECEWISE);
    c.model = test::family_dir(family).string();
    const test::SimResult base = test::simulate_tp(c, 1, reqs, 16);
    c.enable_lora = true;
    c.lora_modules = {{"attn", (tmp.path() / "attn").string()}};
    const test::SimResult ref = test::simulate_tp(c, 1, reqs, 16);
    EXPECT_NE(ref.outputs, base.outputs) << "the adapter must matter";
    for (const bool ep : {false, true})
      for (int tp : {2, 4}) {
        SCOPED_TRACE("tp " + std::to_string(tp) + (ep ? ", expert parallel" : ""));
        c.enable_expert_parallel = ep;
        expect_close(test::simulate_tp(c, tp, reqs, 16), ref, 1e-5f);
      }
  }
}

// --enable-expert-parallel: each rank holds whole routed experts (vLLM's linear placement) and
// computes the pairs routed to them, attention and shared experts split as above. Every MoE
// family's HF fixture (Mixtral's 4 experts: 2 or 1 a rank; Qwen2-MoE's gated shared expert split on
// its width; Qwen3-MoE's dense layer; gpt-oss's expert biases, each rank adding its experts' down
// biases; DeepSeek-V2/V3's routings, shared experts and dense first layer) at TP 2 and 4 gives
// TP 1's greedy tokens and logprobs, eager and with graphs, each rank reading only its experts'
// tensors from the checkpoint.
TEST(TensorParallel, ExpertParallelFixturesEqualTp1) {
  for (const char* family :
       {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "deepseek_v2", "deepseek_v2_qlora", "deepseek_v3"}) {
    SCOPED_TRACE(family);
    const auto reqs = workload(test::load_family_fixture(family).prompts, 24);
    for (M mode : {M::NONE, M::FULL_AND_PIECEWISE}) {
      SCOPED_TRACE(mode_name(mode));
      RunnerConfig c = config(mode);
      c.model = test::family_dir(family).string();
      const test::SimResult ref = test::simulate_tp(c, 1, reqs, 16);
      c.enable_expert_parallel = true;
      expect_tp2_and_tp4_equal(c, reqs, 16, ref);
    }
  }
}

// Experts that do not divide by the ranks: dummy weights of qwen3_moe's shape with 7 experts of
// width 42 (4 + 3 at TP 2, 2 + 2 + 2 + 1 at TP 4, a width TP 4 cannot split) equal TP 1, each rank's
// experts the TP 1 dummy tensors' values; without the flag TP 4 is refused by name.
TEST(TensorParallel, ExpertParallelWithUnevenExpertsEqualsTp1) {
  test::TempDir dir;
  auto j = nlohmann::json::parse(std::ifstream(test::family_dir("qwen3_moe") / "config.json"));
  j["num_local_experts"] = 7;
  j["moe_intermediate_size"] = 42;
  std::ofstream(dir.path() / "config.json") << j.dump();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    prompts.emplace_back();
    for (int t = 0; t < 6 + 7 * i; ++t) prompts.back().push_back((29 * t + 13 * i + 3) % 512);
  }
  const auto reqs = workload(prompts, 24);
  RunnerConfig c = config(M::FULL_AND_PIECEWISE);
  c.model = dir.path().string();
  c.load_format = "dummy";
  c.seed = 4;
  const test::SimResult ref = test::simulate_tp(c, 1, reqs, 16);
  try {
    test::simulate_tp(c, 4, reqs, 16);
    FAIL() << "TP 4 over experts of width 42 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must divide the experts' width 42"), std::string::npos) << e.what();
  }
  c.enable_expert_parallel = true;
  expect_tp2_and_tp4_equal(c, reqs, 16, ref);
}

// The flag changes nothing where it does not apply: at TP 1, and on a model without experts.
TEST(TensorParallel, ExpertParallelWithoutExpertsOrRanksChangesNothing) {
  const auto reqs = workload({golden_prompt("short"), golden_prompt("digits")}, 32);
  RunnerConfig c = config(M::FULL_AND_PIECEWISE);
  c.model = test::stories260k_dir().string();
  const test::SimResult ref = test::simulate_tp(c, 2, reqs, 24);
  c.enable_expert_parallel = true;
  expect_close(test::simulate_tp(c, 2, reqs, 24), ref, 0.0f);
  c.model = test::family_dir("qwen3_moe").string();
  const auto moe_reqs = workload(test::load_family_fixture("qwen3_moe").prompts, 16);
  const test::SimResult moe = test::simulate_tp(c, 1, moe_reqs, 16);
  c.enable_expert_parallel = false;
  expect_close(test::simulate_tp(c, 1, moe_reqs, 16), moe, 0.0f);
}

TEST(TensorParallel, ModelsThatDoNotSplitAreRefused) {
  RunnerConfig c = config(M::NONE);
  c.model = test::stories260k_dir().string();
  try {
    test::simulate_tp(c, 3, {}, 8);
    FAIL() << "TP 3 over 8 heads was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must divide the model's 8 attention heads"), std::string::npos) << e.what();
  }
  RunnerConfig lone = c;
  lone.tensor_parallel_size = 2;  // a runner outside the worker processes has no group to join
  EXPECT_THROW(ModelRunner{lone}, Error);
}

TEST(TensorParallel, DummyShardIsTheSliceOfTheWholeTensor) {
  auto be = make_cpu_backend();
  auto src = make_dummy_source(5, *be);
  const Shape shape{6, 10};
  Tensor whole = Tensor::empty(shape, DType::F32, be->allocator());
  src->load("w", shape, whole, WeightInit::Uniform, 10, {});
  Tensor rows = Tensor::empty({2, 10}, DType::F32, be->allocator());
  src->load("w", shape, rows, WeightInit::Uniform, 10, {0, 3, 2});
  Tensor cols = Tensor::empty({6, 4}, DType::F32, be->allocator());
  src->load("w", shape, cols, WeightInit::Uniform, 10, {1, 5, 4});
  const float* w = whole.data_as<float>();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(rows.data_as<float>()[i], w[30 + i]);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(cols.data_as<float>()[r * 4 + j], w[r * 10 + 5 + j]);
}

}  // namespace
}  // namespace gs
