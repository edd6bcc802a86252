// ModelConfig: the architecture fields of a Hugging Face config.json that graphserve uses.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace gs {

enum class Architecture { Llama, Mistral, Qwen2, Qwen3 };

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  std::string architecture_name;  // as in config.json, e.g. "LlamaForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  bool qk_norm = false;         // per-head RMSNorm of q and k (Qwen3)
  int max_position_embeddings = 0;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  DType torch_dtype = DType::F32;  // dtype the checkpoint says it holds

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  int64_t num_parameters() const;
};

// Parses <dir>/config.json (and generation_config.json for eos/bos when present).
// Throws gs::Error naming the file and the problem.
ModelConfig load_model_config(const std::filesystem::path& model_dir);

}  // namespace gs
