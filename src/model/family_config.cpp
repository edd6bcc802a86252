// The config.json fields of the model families beyond Llama's: sliding windows per layer
// (Mistral, Qwen2's use_sliding_window / max_window_layers, Gemma 2's alternate layers, or
// transformers 5's explicit layer_types), Gemma 2's norms, soft-capping and query scale, Phi-3's
// longrope. A field graphserve cannot honour is an error naming the file and the field.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/json_file.h"
#include "model/model_config.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The window every sliding layer uses, or -1 when config.json sets none.
int parse_window(const json& j, const fs::path& file) {
  if (!json_is_set(j, "sliding_window")) return -1;
  const int w = json_int(j, "sliding_window", -1, file);
  GS_CHECK(w > 0, "{}: 'sliding_window' must be a positive integer or null, got {}", file.string(), w);
  return w;
}

// transformers 5 writes the kind of every layer; it wins over the per-family rules.
std::vector<int> windows_from_layer_types(const json& types, int window, const fs::path& file, int layers) {
  GS_CHECK(types.is_array() && int(types.size()) == layers,
           "{}: 'layer_types' must be a list of {} entries (one per layer), got {}", file.string(), layers,
           types.dump());
  std::vector<int> w;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
    if (t == "full_attention") {
      w.push_back(-1);
    } else if (t == "sliding_attention") {
      GS_CHECK(window > 0, "{}: 'layer_types'[{}] is sliding_attention but 'sliding_window' is not set", file.string(),
               i);
      w.push_back(window);
    } else {
      fail("{}: 'layer_types'[{}] is '{}' (supported: full_attention, sliding_attention)", file.string(), i, t);
    }
  }
  return w;
}

std::vector<int> parse_layer_windows(const json& j, const fs::path& file, const ModelConfig& c) {
  const bool qwen = c.arch == Architecture::Qwen2 || c.arch == Architecture::Qwen3 ||
                    c.arch == Architecture::Qwen2Moe || c.arch == Architecture::Qwen3Moe;
  // Qwen2/Qwen3 use their sliding_window only with use_sliding_window (as HF does; transformers 5
  // writes 0 there without it).
  const int window = qwen && !json_bool(j, "use_sliding_window", false, file) ? -1 : parse_window(j, file);
  if (json_is_set(j, "layer_types")) return windows_from_layer_types(j.at("layer_types"), window, file, c.num_layers);
  std::vector<int> w(size_t(c.num_layers), -1);
  if (window <= 0) return w;
  const int first_sliding = qwen ? json_int(j, "max_window_layers", c.num_layers, file) : 0;
  for (int i = 0; i < c.num_layers; ++i) {
    switch (c.arch) {
      case Architecture::Mistral:
      case Architecture::Mixtral:
      case Architecture::Phi3: w[size_t(i)] = window; break;
      case Architecture::Qwen2:
      case Architecture::Qwen3:
      case Architecture::Qwen2Moe:
      case Architecture::Qwen3Moe: w[size_t(i)] = i >= first_sliding ? window : -1; break;
      case Architecture::Gemma2:
      case Architecture::GptOss: w[size_t(i)] = i % 2 == 0 ? window : -1; break;  // HF: (i + 1) % 2
      case Architecture::Llama:
      case Architecture::DeepseekV2:
      case Architecture::DeepseekV3:
        fail(
            "{}: 'sliding_window' {} is set, but {} has no sliding-window attention; remove it (a Llama with "
            "sliding windows is MistralForCausalLM)",
            file.string(), window, c.architecture_name);
    }
  }
  return w;
}

// The MLP's activation: silu everywhere but Gemma 2 (gelu tanh).
Activation parse_activation(const json& j, const fs::path& file, const ModelConfig& c) {
  const bool gemma = c.arch == Architecture::Gemma2;
  const char* key = gemma && json_is_set(j, "hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string fallback = gemma ? "gelu_pytorch_tanh" : "silu";
  std::string act = fallback;
  if (json_is_set(j, key)) {
    GS_CHECK(j.at(key).is_string(), "{}: '{}' must be a string, got {}", file.string(), key, j.at(key).dump());
    act = j.at(key).get<std::string>();
  }
  if (act == "silu" || act == "swish") return Activation::Silu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || (gemma && act == "gelu")) return Activation::GeluTanh;
  fail("{}: '{}' is '{}' (supported: silu, gelu_pytorch_tanh)", file.string(), key, act);
}

void parse_gemma2(const json& j, const fs::path& file, ModelConfig& c) {
  c.gemma_norms = true;
  c.attn_softcap = float(json_number(j, "attn_logit_softcapping", 0.0, file));
  c.final_softcap = float(json_number(j, "final_logit_softcapping", 0.0, file));
  c.query_pre_attn_scalar = float(json_number(j, "query_pre_attn_scalar", c.head_dim, file));
  GS_CHECK(c.attn_softcap >= 0 && c.final_softcap >= 0 && c.query_pre_attn_scalar > 0,
           "{}: attn_logit_softcapping and final_logit_softcapping must be >= 0 (or null) and query_pre_attn_scalar "
           "> 0",
           file.string());
  // Gemma 2 always ties its embeddings; its config may say nothing.
  c.tie_word_embeddings = json_bool(j, "tie_word_embeddings", true, file);
}

std::vector<float> factors(const json& scaling, const char* key, size_t n, const fs::path& file) {
  auto it = scaling.find(key);
  GS_CHECK(it != scaling.end() && it->is_array() && it->size() == n,
           "{}: rope_scaling '{}' must be a list of {} numbers (head_dim / 2)", file.string(), key, n);
  std::vector<float> f;
  for (const auto& v : *it) {
    GS_CHECK(v.is_number() && v.get<double>() > 0, "{}: rope_scaling '{}' holds {}, expected positive numbers",
             file.string(), key, v.dump());
    f.push_back(v.get<float>());
  }
  return f;
}

}  // namespace

namespace detail {

// HF _compute_longrope_parameters, with its per-step switch to the long factors made per token
// (positions >= original_max_position_embeddings use them, as HF's decode steps do).
void parse_longrope(const json& scaling, const json& j, const fs::path& file, ModelConfig& c) {
  const size_t half = size_t(c.head_dim / 2);
  c.rope.short_factor = factors(scaling, "short_factor", half, file);
  c.rope.long_factor = factors(scaling, "long_factor", half, file);
  int original = json_int(j, "original_max_position_embeddings", 0, file);
  if (original <= 0) original = json_int(scaling, "original_max_position_embeddings", 0, file);
  double factor = json_number(scaling, "factor", 1.0, file);
  if (original > 0) {
    factor = double(c.max_position_embeddings) / original;
  } else {
    original = c.max_position_embeddings;
  }
  GS_CHECK(original > 0, "{}: longrope needs original_max_position_embeddings or max_position_embeddings",
           file.string());
  c.rope.long_from = original;
  double attn = json_number(scaling, "attention_factor", 0.0, file);
  if (attn <= 0) attn = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(double(original)));
  c.rope_attention_factor = float(attn);
}

void parse_family_fields(const json& j, const fs::path& file, ModelConfig& c) {
  c.layer_windows = parse_layer_windows(j, file, c);
  c.activation = parse_activation(j, file, c);
  if (c.arch == Architecture::Gemma2) parse_gemma2(j, file, c);
  parse_moe_fields(j, file, c);
  parse_gpt_oss_fields(j, file, c);
  parse_deepseek_fields(j, file, c);
  GS_CHECK(!json_bool(j, "mlp_bias", false, file), "{}: 'mlp_bias' true is not supported", file.string());
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"})
    GS_CHECK(c.arch == Architecture::Gemma2 || !json_is_set(j, key), "{}: '{}' is only supported for Gemma2ForCausalLM",
             file.string(), key);
}

}  // namespace detail

bool ModelConfig::all_layers_windowed() const {
  if (layer_windows.empty()) return false;
  for (int w : layer_windows)
    if (w <= 0) return false;
  return true;
}

int ModelConfig::max_window() const {
  if (!all_layers_windowed()) return -1;
  int m = 0;
  for (int w : layer_windows) m = std::max(m, w);
  return m;
}

float ModelConfig::attention_scale() const {
  const float base = query_pre_attn_scalar > 0 ? query_pre_attn_scalar : float(head_dim);
  return rope_attention_factor * rope_attention_factor / std::sqrt(base);
}

}  // namespace gs
