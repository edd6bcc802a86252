// Every model family against Hugging Face on the CPU (f32, eager): both prompts prefilled in one
// batch, then decoded together feeding HF's tokens; at every step our argmax must be HF's greedy
// token, and the logits HF kept must match within 1e-4. The fixtures cover Llama, Llama 3 rope
// scaling, Mistral and Qwen2 with sliding windows shorter than the long prompt, Qwen3, Phi-3
// (fused weights, longrope past original_max_position_embeddings), Gemma 2, and the mixtures of
// experts in the Hub's per-expert tensors: Mixtral (softmax top-2 renormalised), Qwen2-MoE (a
// gated shared expert, unnormalised weights, decoder_sparse_step 2: a dense layer between sparse
// ones) and Qwen3-MoE (norm_topk_prob, mlp_only_layers, q/k norm); gpt-oss (attention sinks,
// sliding and full layers alternating, q/k/v/o and router biases, biased interleaved experts with
// the clamped SwiGLU binding, YaRN past original_max_position_embeddings).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/family_fixtures.h"
#include "model_harness.h"

namespace gs {
namespace {

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class Families : public ::testing::TestWithParam<std::string> {};

TEST_P(Families, GreedyTokensAndLogitsMatchHuggingFace) {
  const test::FamilyFixture fx = test::load_family_fixture(GetParam());
  ModelSource src;
  src.dir = test::family_dir(GetParam()).string();
  test::ModelHarness h(src, 128, 4, 73);
  std::vector<std::vector<float>> last(2);
  const auto pre = h.step({{0, fx.prompts[0]}, {1, fx.prompts[1]}});
  last[0] = pre[fx.prompts[0].size() - 1];
  last[1] = pre.back();
  const int steps = int(fx.tokens[0].size());
  for (int s = 0; s < steps; ++s) {
    const auto k = std::find(fx.logit_steps.begin(), fx.logit_steps.end(), s);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(argmax(last[size_t(r)]), fx.tokens[size_t(r)][size_t(s)]) << "prompt " << r << " step " << s;
      if (k != fx.logit_steps.end()) {
        EXPECT_LE(max_abs_diff(last[size_t(r)], fx.logits[size_t(r)][size_t(k - fx.logit_steps.begin())]), 1e-4f)
            << "prompt " << r << " step " << s;
      }
    }
    if (s + 1 == steps) break;
    last = h.step({{0, {fx.tokens[0][size_t(s)]}}, {1, {fx.tokens[1][size_t(s)]}}});
  }
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, Families, ::testing::ValuesIn(test::family_names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(DeepSeek, Families, ::testing::ValuesIn(test::mla_family_names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Fp8, Families, ::testing::ValuesIn(test::fp8_family_names()),
                         [](const auto& info) { return info.param; });

TEST(FamilyConfigs, WindowsPerLayerFollowEachFamily) {
  EXPECT_EQ(load_model_config(test::family_dir("mistral_swa")).layer_windows, (std::vector<int>{24, 24}));
  EXPECT_EQ(load_model_config(test::family_dir("qwen2_swa")).layer_windows, (std::vector<int>{-1, 24, 24}));
  EXPECT_EQ(load_model_config(test::family_dir("qwen2")).layer_windows, (std::vector<int>{-1, -1}));
  EXPECT_EQ(load_model_config(test::family_dir("gemma2")).layer_windows, (std::vector<int>{24, -1}));
  const ModelConfig phi = load_model_config(test::family_dir("phi3"));
  EXPECT_EQ(phi.rope.long_from, 64);
  EXPECT_NEAR(phi.rope_attention_factor, std::sqrt(1 + std::log(4.0) / std::log(64.0)), 1e-6);
  const ModelConfig g = load_model_config(test::family_dir("gemma2"));
  EXPECT_TRUE(g.gemma_norms && g.tie_word_embeddings);
  EXPECT_EQ(g.activation, Activation::GeluTanh);
  EXPECT_FLOAT_EQ(g.attention_scale(), 1.0f / std::sqrt(24.0f));
  // decoder_sparse_step 2 (Qwen2-MoE), mlp_only_layers [1] (Qwen3-MoE): dense layers between sparse ones.
  EXPECT_EQ(load_model_config(test::family_dir("qwen2_moe")).moe.sparse_layers,
            (std::vector<bool>{false, true, false}));
  EXPECT_EQ(load_model_config(test::family_dir("qwen3_moe")).moe.sparse_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(load_model_config(test::family_dir("mixtral")).moe.num_experts, 4);
  const ModelConfig o = load_model_config(test::family_dir("gpt_oss"));
  EXPECT_EQ(o.layer_windows, (std::vector<int>{24, -1}));
  EXPECT_TRUE(o.attention_sinks && o.o_proj_bias && o.attention_bias && o.moe.router_bias && o.moe.expert_bias);
  EXPECT_EQ(o.activation, Activation::ClampedSwiglu);
  EXPECT_EQ(o.moe.routing.top_k, 2);
  EXPECT_TRUE(o.moe.routing.renormalize);
  EXPECT_FLOAT_EQ(o.moe.swiglu_limit, 7.0f);
  EXPECT_FLOAT_EQ(o.rope.yarn_factor, 4.0f);
  EXPECT_FALSE(o.rope.yarn_truncate);
  EXPECT_NEAR(o.rope_attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
}

}  // namespace
}  // namespace gs
