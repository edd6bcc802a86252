// config.json variants: field defaults, eos lists, llama3 rope scaling in both transformers
// formats, architecture flags.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint_writer.h"
#include "core/error.h"
#include "model/model_config.h"

namespace gs {
namespace {

using nlohmann::json;

json base_config(const std::string& arch) {
  return {{"architectures", {arch}},  {"vocab_size", 1000},     {"hidden_size", 256},
          {"intermediate_size", 512}, {"num_hidden_layers", 2}, {"num_attention_heads", 8},
          {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-5},   {"max_position_embeddings", 2048},
          {"torch_dtype", "bfloat16"}};
}

ModelConfig load(const json& config, const json& gen = nullptr) {
  test::TempDir d;
  std::ofstream(d.path() / "config.json") << config.dump();
  if (!gen.is_null()) std::ofstream(d.path() / "generation_config.json") << gen.dump();
  return load_model_config(d.path());
}

TEST(ModelConfig, DefaultsAndArchitectureFlags) {
  const ModelConfig llama = load(base_config("LlamaForCausalLM"));
  EXPECT_EQ(llama.arch, Architecture::Llama);
  EXPECT_EQ(llama.head_dim, 32);  // hidden / heads
  EXPECT_EQ(llama.rope.head_dim, 32);
  EXPECT_EQ(llama.rope.theta, 10000.0f);
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.attention_bias);
  EXPECT_EQ(llama.torch_dtype, DType::BF16);
  EXPECT_TRUE(load(base_config("Qwen2ForCausalLM")).attention_bias);
  EXPECT_TRUE(load(base_config("Qwen3ForCausalLM")).qk_norm);
  EXPECT_EQ(load(base_config("MistralForCausalLM")).arch, Architecture::Mistral);
}

TEST(ModelConfig, EosMayBeAListAndGenerationConfigWins) {
  json c = base_config("LlamaForCausalLM");
  c["eos_token_id"] = 5;
  c["bos_token_id"] = 4;
  EXPECT_EQ(load(c).eos_token_ids, std::vector<int>{5});
  const ModelConfig g = load(c, {{"eos_token_id", {7, 8}}, {"bos_token_id", 3}});
  EXPECT_EQ(g.eos_token_ids, (std::vector<int>{7, 8}));
  EXPECT_EQ(g.bos_token_id, 3);
  c["eos_token_id"] = "two";
  EXPECT_THROW(load(c), Error);
}

TEST(ModelConfig, Llama3RopeScalingInBothFormats) {
  json c = base_config("LlamaForCausalLM");
  c["rope_theta"] = 500000.0;
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  const ModelConfig a = load(c);
  EXPECT_EQ(a.rope.theta, 500000.0f);
  EXPECT_EQ(a.rope.llama3_factor, 32.0f);
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                          {"factor", 32.0},          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const ModelConfig b = load(c);
  EXPECT_EQ(b.rope.theta, 500000.0f);
  EXPECT_EQ(b.rope.llama3_factor, 32.0f);
  EXPECT_EQ(rope_inv_freq(a.rope), rope_inv_freq(b.rope));
}

TEST(ModelConfig, InvalidShapesAreErrors) {
  json c = base_config("LlamaForCausalLM");
  c["num_key_value_heads"] = 3;  // 8 heads are not a multiple of 3
  EXPECT_THROW(load(c), Error);
  c = base_config("LlamaForCausalLM");
  c.erase("hidden_size");
  try {
    load(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gs
