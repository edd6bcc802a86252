// ModelConfig: the architecture fields of a Hugging Face config.json that graphserve uses.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/quant_config.h"
#include "ops/backend.h"

namespace gs {

enum class Architecture {
  Llama,
  Mistral,
  Qwen2,
  Qwen3,
  Phi3,
  Gemma2,
  Mixtral,
  Qwen2Moe,
  Qwen3Moe,
  GptOss,
  DeepseekV2,
  DeepseekV3
};
using Activation = GatedActivation;  // the MLP's gate activation (ops/gated_activation.h)

// The mixture-of-experts fields (model/moe_config.cpp); num_experts == 0: a dense model.
struct MoeConfig {
  int num_experts = 0;
  int expert_intermediate = 0;  // each routed expert's MLP width (moe_intermediate_size; Mixtral's intermediate_size)
  int shared_intermediate = 0;  // the shared expert's MLP width, 0: none
  bool shared_gate = false;     // Qwen2-MoE: the shared expert's output is scaled by sigmoid(x . g)
  MoeRouting routing;           // top_k, scores, renormalisation
  std::vector<bool> sparse_layers;  // per layer: the MLP is the MoE block (else a dense MLP of intermediate_size)
  // gpt-oss (model/gpt_oss_config.cpp): the router's bias, each expert's gate/up and down biases,
  // the clamped SwiGLU's limit (the activation is then GatedActivation::ClampedSwiglu), and the
  // checkpoint's experts in MXFP4 (dequantized at load).
  bool router_bias = false;
  bool expert_bias = false;
  float swiglu_limit = 0.0f;
  bool mxfp4_experts = false;
  bool score_bias = false;  // DeepSeek-V3: the router's e_score_correction_bias [E] joins the selection keys

  bool enabled() const { return num_experts > 0; }
  bool sparse(int layer) const { return enabled() && sparse_layers[size_t(layer)]; }
};

// Multi-head latent attention (DeepSeek-V2/V3; model/deepseek_config.cpp). Each token caches one
// latent row of kv_lora_rank + qk_rope_head_dim values (the normed c_kv, then the roped k_pe),
// shared by every head; kv_b_proj expands it into the heads' k_nope and v.
struct MlaConfig {
  int q_lora_rank = 0;   // > 0: q_a_proj, q_a_layernorm, q_b_proj; 0: q_proj
  int kv_lora_rank = 0;  // > 0: the model uses MLA
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool rope_interleave = true;  // rotary pairs (2i, 2i + 1) (DeepSeek); false: rotate-half pairs (i, i + R / 2)
  float rope_scale = 1.0f;      // YaRN's attention factor: the cos / sin scale of q_pe and k_pe
  float softmax_scale = 0.0f;   // qk_head_dim^-1/2, times YaRN's mscale(factor, mscale_all_dim)^2

  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }  // cached values a token and layer
};

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
  QuantConfig quant;               // FP8 projection weights (quantization_config or --quantization)

  // Model families (model/family_config.cpp).
  std::vector<int> layer_windows;  // per layer: sliding window in tokens, or -1 (full attention)
  Activation activation = Activation::Silu;
  bool gemma_norms = false;            // Gemma 2: RMSNorm (1 + w), norms after attention and MLP, embedding * sqrt(H)
  float attn_softcap = 0.0f;           // > 0: attention scores soft-capped (Gemma 2)
  float final_softcap = 0.0f;          // > 0: logits soft-capped (Gemma 2)
  float query_pre_attn_scalar = 0.0f;  // > 0: softmax scale is its -1/2 power (Gemma 2), else head_dim's
  float rope_attention_factor = 1.0f;  // longrope's cos/sin scale, folded into the softmax scale
  MoeConfig moe;
  // gpt-oss: a learned sink logit per query head in every attention's softmax, and o_proj's bias.
  bool attention_sinks = false;
  bool o_proj_bias = false;
  MlaConfig mla;

  int window(int layer) const { return layer_windows.empty() ? -1 : layer_windows[size_t(layer)]; }
  // True when every layer has a sliding window (KV older than the largest window can be freed).
  bool all_layers_windowed() const;
  int max_window() const;  // the largest window, or -1 when some layer attends to all
  float attention_scale() const;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  int64_t num_parameters() const;
  // Parameters one token computes with: every routed expert counts top_k / num_experts.
  int64_t num_active_parameters() const;
};

// Parses <dir>/config.json (and generation_config.json for eos/bos when present).
// Throws gs::Error naming the file and the problem.
ModelConfig load_model_config(const std::filesystem::path& model_dir);

namespace detail {
// The fields of a config.json object (`file` names it in errors); load_model_config without
// generation_config.json. Presets of the Hub's configs go through it too.
ModelConfig parse_model_config(const nlohmann::json& j, const std::filesystem::path& file);
// Sliding windows, activation, Gemma 2 fields and config values graphserve cannot honour
// (family_config.cpp); called by load_model_config after the common fields.
void parse_family_fields(const nlohmann::json& j, const std::filesystem::path& file, ModelConfig& c);
// rope_scaling of type longrope / su (Phi-3) into c.rope and c.rope_attention_factor.
// The MoE fields of Mixtral, Qwen2-MoE and Qwen3-MoE into c.moe (moe_config.cpp).
void parse_moe_fields(const nlohmann::json& j, const std::filesystem::path& file, ModelConfig& c);
// DeepSeek-V2/V3: MLA, the MoE fields and YaRN's softmax factor (deepseek_config.cpp).
void parse_deepseek_fields(const nlohmann::json& j, const std::filesystem::path& file, ModelConfig& c);
// The attention parameters of one MLA layer (deepseek_config.cpp).
int64_t mla_attention_parameters(const ModelConfig& c);
void parse_longrope(const nlohmann::json& scaling, const nlohmann::json& j, const std::filesystem::path& file,
                    ModelConfig& c);
// gpt-oss's fields (gpt_oss_config.cpp): sinks, biases, experts, swiglu_limit, MXFP4 experts.
void parse_gpt_oss_fields(const nlohmann::json& j, const std::filesystem::path& file, ModelConfig& c);
// rope_scaling of type yarn into c.rope and c.rope_attention_factor (gpt_oss_config.cpp).
void parse_yarn(const nlohmann::json& scaling, const nlohmann::json& j, const std::filesystem::path& file,
                ModelConfig& c);
}  // namespace detail

}  // namespace gs
