// The Hugging Face fixtures of tests/data/families (tools/hf_fixtures/make_family_fixtures.py):
// one small random-weight model per family with HF's greedy tokens and f32 logits.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_paths.h"

namespace gs::test {

inline const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = {"llama", "llama3", "mistral_swa", "qwen2",     "qwen2_swa", "qwen3",
                                                 "phi3",  "gemma2", "mixtral",     "qwen2_moe", "qwen3_moe", "gpt_oss"};
  return names;
}

// DeepSeek-V2 (q_proj, group-limited routing, YaRN; q_lora_rank, greedy routing) and V3 (sigmoid
// scores with e_score_correction_bias, noaux_tc groups, YaRN's mscale_all_dim): multi-head latent
// attention, which runs on the CPU only so far.
inline const std::vector<std::string>& mla_family_names() {
  static const std::vector<std::string> names = {"deepseek_v2", "deepseek_v2_qlora", "deepseek_v3"};
  return names;
}

// FP8 checkpoints of the same kind of models (tools/hf_fixtures/fp8_fixtures.py): per-channel
// compressed-tensors, 128x128 blocks with weight_scale_inv (Qwen3), per-tensor with input_scale;
// their HF reference runs in f32 on the exactly dequantized weights.
inline const std::vector<std::string>& fp8_family_names() {
  static const std::vector<std::string> names = {"fp8_channel", "fp8_block", "fp8_tensor"};
  return names;
}

// $GS_FAMILY_FIXTURES (a packed copy on the GPU machine), else the source tree's.
inline std::filesystem::path family_dir(const std::string& name) {
  if (const char* p = std::getenv("GS_FAMILY_FIXTURES")) return std::filesystem::path(p) / name;
  return gs::test::source_dir() / "tests" / "data" / "families" / name;
}

struct FamilyFixture {
  std::vector<std::vector<int32_t>> prompts;            // two: the second longer than the sliding window
  std::vector<std::vector<int32_t>> tokens;             // HF's greedy tokens per prompt
  std::vector<int> logit_steps;                         // steps whose logits are kept (0: the prompt's last position)
  std::vector<std::vector<std::vector<float>>> logits;  // [prompt][i][vocab] at logit_steps[i]
};

inline FamilyFixture load_family_fixture(const std::string& name) {
  std::ifstream in(family_dir(name) / "hf_greedy.json");
  const auto j = nlohmann::json::parse(in);
  FamilyFixture f;
  f.prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  f.tokens = j["tokens"].get<std::vector<std::vector<int32_t>>>();
  f.logit_steps = j["logit_steps"].get<std::vector<int>>();
  f.logits = j["logits"].get<std::vector<std::vector<std::vector<float>>>>();
  return f;
}

}  // namespace gs::test
