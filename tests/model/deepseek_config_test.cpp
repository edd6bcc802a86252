// DeepSeek-V2/V3 config.json: MLA dims, routing, shared experts, dense first layers, YaRN with
// DeepSeek's mscale, and the fields refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/deepseek_model.h"
#include "model/family_fixtures.h"
#include "model/presets.h"
#include "ops/rope.h"

namespace gs {
namespace {

using nlohmann::json;

json v3_config() {
  return json::parse(R"({
    "architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 256,
    "q_lora_rank": 24, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "n_routed_experts": 8, "n_shared_experts": 1, "moe_intermediate_size": 24, "num_experts_per_tok": 3,
    "first_k_dense_replace": 1, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
    "topk_method": "noaux_tc", "scoring_func": "sigmoid",
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "mscale": 1.0,
                        "mscale_all_dim": 1.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
                        "beta_slow": 1.0}})");
}

ModelConfig parse(const json& j) { return detail::parse_model_config(j, "config.json"); }

void expect_error(json j, const char* key, const json& value, const char* needle) {
  j[key] = value;
  try {
    parse(j);
    ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DeepseekConfig, V3RoutingMlaAndYarn) {
  const ModelConfig c = parse(v3_config());
  EXPECT_EQ(c.arch, Architecture::DeepseekV3);
  EXPECT_EQ(c.mla.q_lora_rank, 24);
  EXPECT_EQ(c.mla.latent_dim(), 40);
  EXPECT_EQ(c.head_dim, 24);
  EXPECT_TRUE(c.mla.rope_interleave);
  EXPECT_EQ(c.moe.sparse_layers, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.moe.shared_intermediate, 24);
  EXPECT_TRUE(c.moe.score_bias);
  const MoeRouting& r = c.moe.routing;
  EXPECT_EQ(r.score, MoeScore::Sigmoid);
  EXPECT_EQ(r.group_key, MoeGroupKey::TopTwoSum);
  EXPECT_EQ(r.n_group, 4);
  EXPECT_EQ(r.topk_group, 2);
  EXPECT_TRUE(r.renormalize);  // V3's default
  EXPECT_FLOAT_EQ(r.scaling, 2.5f);
  // softmax scale qk^-1/2 * mscale(4, 1)^2; cos / sin scale mscale(4, 1) / mscale(4, 1)
  const double m = 0.1 * std::log(4.0) + 1.0;
  EXPECT_NEAR(c.mla.softmax_scale, m * m / std::sqrt(24.0), 1e-6);
  EXPECT_FLOAT_EQ(c.mla.rope_scale, 1.0f);
  // HF _compute_yarn_parameters for dim 8, base 1e4, factor 4, original 64: the ramp runs over
  // pairs [0, 2), so pair 0 keeps its frequency, pair 1 blends half-half, pairs 2, 3 are divided by 4.
  const std::vector<float> f = rope_inv_freq(c.rope);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_NEAR(f[0], 1.0f, 1e-7);
  EXPECT_NEAR(f[1], 0.5f * 0.1f / 4 + 0.5f * 0.1f, 1e-7);
  EXPECT_NEAR(f[2], 0.01f / 4, 1e-8);
  EXPECT_NEAR(f[3], 0.001f / 4, 1e-9);
}

TEST(DeepseekConfig, V2FixturesAndThePreset) {
  const ModelConfig v2 = load_model_config(test::family_dir("deepseek_v2"));
  EXPECT_EQ(v2.mla.q_lora_rank, 0);
  EXPECT_EQ(v2.moe.routing.score, MoeScore::Softmax);
  EXPECT_EQ(v2.moe.routing.group_key, MoeGroupKey::Max);
  EXPECT_FALSE(v2.moe.score_bias || v2.moe.routing.renormalize);
  EXPECT_NEAR(v2.mla.rope_scale, 0.1 * std::log(4.0) + 1.0, 1e-6);  // no mscale given: mscale(factor)
  EXPECT_NEAR(v2.mla.softmax_scale, 1.0 / std::sqrt(24.0), 1e-7);   // no mscale_all_dim: no softmax factor
  EXPECT_EQ(load_model_config(test::family_dir("deepseek_v2_qlora")).moe.routing.n_group, 1);  // greedy

  const ModelConfig lite = find_preset("deepseek-v2-lite").config;
  EXPECT_EQ(lite.mla.kv_lora_rank, 512);
  EXPECT_EQ(kv_layout(lite).head_dim, 576);
  EXPECT_EQ(kv_layout(lite).planes, 1);
  EXPECT_EQ(lite.moe.routing.top_k, 6);
  EXPECT_EQ(lite.moe.shared_intermediate, 2 * 1408);
  EXPECT_FALSE(lite.moe.sparse(0));
  EXPECT_TRUE(lite.moe.sparse(26));
  const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(lite.mla.softmax_scale, m * m / std::sqrt(192.0), 1e-6);
  EXPECT_NEAR(lite.mla.rope_scale, 1.0, 1e-6);
  EXPECT_GT(lite.num_parameters(), 15'000'000'000LL);
  EXPECT_LT(lite.num_active_parameters(), 3'000'000'000LL);
}

TEST(DeepseekConfig, RefusedFieldsAreNamed) {
  const json j = v3_config();
  expect_error(j, "topk_method", "random", "'topk_method' 'random'");
  expect_error(j, "scoring_func", "sqrtsoftplus", "'scoring_func' 'sqrtsoftplus'");
  expect_error(j, "n_group", 3, "'n_group' 3");
  expect_error(j, "attention_bias", true, "'attention_bias'");
  expect_error(j, "ep_size", 2, "'ep_size'");
  expect_error(j, "kv_lora_rank", nullptr, "'kv_lora_rank' must be a positive integer (missing");
  json llama = v3_config();
  llama["architectures"] = json::array({"LlamaForCausalLM"});
  llama.erase("kv_lora_rank");
  llama["rope_parameters"] = json{{"rope_type", "default"}, {"rope_theta", 1e4}};
  expect_error(llama, "kv_lora_rank", 32, "'kv_lora_rank' (multi-head latent attention) is only supported");
}

}  // namespace
}  // namespace gs
