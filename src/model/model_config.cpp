// load_model_config: config.json (+ generation_config.json) -> ModelConfig.
#include "model/model_config.h"

#include <array>

#include "core/error.h"
#include "model/json_file.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ArchEntry {
  const char* name;
  Architecture arch;
};
constexpr std::array<ArchEntry, 12> kArchitectures{{{"LlamaForCausalLM", Architecture::Llama},
                                                    {"MistralForCausalLM", Architecture::Mistral},
                                                    {"Qwen2ForCausalLM", Architecture::Qwen2},
                                                    {"Qwen3ForCausalLM", Architecture::Qwen3},
                                                    {"Phi3ForCausalLM", Architecture::Phi3},
                                                    {"Gemma2ForCausalLM", Architecture::Gemma2},
                                                    {"MixtralForCausalLM", Architecture::Mixtral},
                                                    {"Qwen2MoeForCausalLM", Architecture::Qwen2Moe},
                                                    {"Qwen3MoeForCausalLM", Architecture::Qwen3Moe},
                                                    {"GptOssForCausalLM", Architecture::GptOss},
                                                    {"DeepseekV2ForCausalLM", Architecture::DeepseekV2},
                                                    {"DeepseekV3ForCausalLM", Architecture::DeepseekV3}}};

void parse_architecture(const json& j, const fs::path& file, ModelConfig& c) {
  auto it = j.find("architectures");
  GS_CHECK(it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string(),
           "{}: 'architectures' must be a non-empty list of names", file.string());
  const std::string name = (*it)[0].get<std::string>();
  for (const auto& a : kArchitectures) {
    if (name == a.name) {
      c.arch = a.arch;
      c.architecture_name = name;
      return;
    }
  }
  fail(
      "{}: unsupported architecture '{}' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
      "Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, "
      "Qwen3MoeForCausalLM, GptOssForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM)",
      file.string(), name);
}

// rope_theta + rope_scaling (transformers 4), or one rope_parameters object (transformers 5).
void check_full_rotary(const json& j, const fs::path& file) {
  const double partial = json_number(j, "partial_rotary_factor", 1.0, file);
  GS_CHECK(partial == 1.0, "{}: partial_rotary_factor {} is not supported (only 1.0: RoPE over the whole head)",
           file.string(), partial);
}

void parse_rope(const json& j, const fs::path& file, ModelConfig& c) {
  c.rope.head_dim = c.head_dim;
  check_full_rotary(j, file);
  auto params = j.find("rope_parameters");
  const bool v5 = params != j.end() && params->is_object();
  c.rope.theta = float(json_number(v5 ? *params : j, "rope_theta", json_number(j, "rope_theta", 10000.0, file), file));
  const json* scaling = v5 ? &*params : nullptr;
  if (!v5) {
    auto it = j.find("rope_scaling");
    if (it == j.end() || it->is_null()) return;
    GS_CHECK(it->is_object(), "{}: 'rope_scaling' must be an object or null", file.string());
    scaling = &*it;
  }
  std::string type = "default";
  for (const char* key : {"type", "rope_type"}) {  // rope_type wins when both are given
    auto t = scaling->find(key);
    if (t == scaling->end() || t->is_null()) continue;
    GS_CHECK(t->is_string(), "{}: rope_scaling '{}' must be a string (default, llama3, longrope, su), got {}",
             file.string(), key, t->dump());
    type = t->get<std::string>();
  }
  check_full_rotary(*scaling, file);
  if (type == "default") return;
  if (type == "longrope" || type == "su") return detail::parse_longrope(*scaling, j, file, c);
  if (type == "yarn") return detail::parse_yarn(*scaling, j, file, c);
  GS_CHECK(type == "llama3",
           "{}: rope_scaling type '{}' is not supported (supported: default, llama3, longrope, su, yarn)",
           file.string(), type);
  c.rope.llama3_factor = float(json_number(*scaling, "factor", 8.0, file));
  c.rope.llama3_low_freq_factor = float(json_number(*scaling, "low_freq_factor", 1.0, file));
  c.rope.llama3_high_freq_factor = float(json_number(*scaling, "high_freq_factor", 4.0, file));
  c.rope.llama3_original_max_position = json_int(*scaling, "original_max_position_embeddings", 8192, file);
  GS_CHECK(c.rope.llama3_factor > 0 && c.rope.llama3_high_freq_factor > c.rope.llama3_low_freq_factor,
           "{}: rope_scaling llama3 needs factor > 0 and high_freq_factor > low_freq_factor", file.string());
}

// eos_token_id may be an int, a list of ints, or null.
std::vector<int> parse_eos(const json& j, const fs::path& file) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return {};
  if (it->is_number_integer()) return {it->get<int>()};
  GS_CHECK(it->is_array(), "{}: 'eos_token_id' must be an integer or a list of integers", file.string());
  std::vector<int> ids;
  for (const auto& v : *it) {
    GS_CHECK(v.is_number_integer(), "{}: 'eos_token_id' must be an integer or a list of integers", file.string());
    ids.push_back(v.get<int>());
  }
  return ids;
}

DType parse_torch_dtype(const json& j, const fs::path& file) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    GS_CHECK(it->is_string(), "{}: '{}' must be a string", file.string(), key);
    const std::string s = it->get<std::string>();
    if (s == "float32") return DType::F32;
    if (s == "float16") return DType::F16;
    if (s == "bfloat16") return DType::BF16;
    fail("{}: {} '{}' is not supported (supported: float32, float16, bfloat16)", file.string(), key, s);
  }
  return DType::F32;
}

// Upper bounds on config integers, far above any released model, low enough that products such
// as num_heads * head_dim, positions * head_dim or vocab_size * hidden_size cannot overflow.
void check_range(int64_t v, int64_t lo, int64_t hi, const char* key, const fs::path& file) {
  GS_CHECK(v >= lo && v <= hi, "{}: '{}' is {}, outside [{}, {}]", file.string(), key, v, lo, hi);
}

void check_ranges(const ModelConfig& c, const fs::path& file) {
  check_range(c.vocab_size, 1, 1 << 22, "vocab_size", file);
  check_range(c.hidden_size, 1, 1 << 16, "hidden_size", file);
  check_range(c.intermediate_size, 1, 1 << 20, "intermediate_size", file);
  check_range(c.num_layers, 1, 1 << 10, "num_hidden_layers", file);
  check_range(c.num_heads, 1, 1 << 10, "num_attention_heads", file);
  check_range(c.num_kv_heads, 1, c.num_heads, "num_key_value_heads", file);
  check_range(c.head_dim, 1, 1 << 10, "head_dim", file);
  check_range(c.max_position_embeddings, 1, 1 << 24, "max_position_embeddings", file);
  check_range(c.rope.llama3_original_max_position, 1, 1 << 24, "original_max_position_embeddings", file);
  for (int w : c.layer_windows) check_range(w, -1, 1 << 24, "sliding_window", file);
}

void validate(const ModelConfig& c, const fs::path& file) {
  check_ranges(c, file);
  GS_CHECK(c.num_heads % c.num_kv_heads == 0, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
           file.string(), c.num_heads, c.num_kv_heads);
  GS_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "{}: head_dim must be a positive even number, got {}", file.string(),
           c.head_dim);
  GS_CHECK(c.rms_norm_eps > 0, "{}: rms_norm_eps must be positive", file.string());
}

}  // namespace

namespace {

// Parameters of layer `l`'s MLP: all of them, or (active) those one token uses.
int64_t mlp_parameters(const ModelConfig& c, int l, bool active) {
  const int64_t H = c.hidden_size;
  if (!c.moe.sparse(l)) return 3 * H * c.intermediate_size;
  const MoeConfig& m = c.moe;
  const int64_t experts = active ? m.routing.top_k : m.num_experts;
  int64_t n = experts * 3 * H * m.expert_intermediate + int64_t(m.num_experts) * H;  // experts + router
  if (m.router_bias) n += m.num_experts;
  if (m.expert_bias) n += experts * (2 * m.expert_intermediate + H);
  n += 3 * H * m.shared_intermediate + (m.shared_gate ? H : 0);
  return n;
}

int64_t parameters(const ModelConfig& c, bool active) {
  const int64_t H = c.hidden_size, qkv = c.q_size() + 2 * c.kv_size();
  int64_t layer = (c.gemma_norms ? 4 : 2) * H + qkv * H + int64_t(c.q_size()) * H;
  if (c.mla.enabled()) layer = 2 * H + detail::mla_attention_parameters(c);
  if (c.attention_bias) layer += qkv;
  if (c.qk_norm) layer += 2 * c.head_dim;
  if (c.o_proj_bias) layer += H;
  if (c.attention_sinks) layer += c.num_heads;
  int64_t n = int64_t(c.vocab_size) * H + int64_t(c.num_layers) * layer + H;
  for (int l = 0; l < c.num_layers; ++l) n += mlp_parameters(c, l, active);
  if (!c.tie_word_embeddings) n += int64_t(c.vocab_size) * H;
  return n;
}

}  // namespace

int64_t ModelConfig::num_parameters() const { return parameters(*this, false); }
int64_t ModelConfig::num_active_parameters() const { return parameters(*this, true); }

namespace detail {

ModelConfig parse_model_config(const json& j, const fs::path& file) {
  GS_CHECK(j.is_object(), "{}: expected a JSON object", file.string());
  ModelConfig c;
  parse_architecture(j, file, c);
  c.quant = parse_quant_config(j, file);  // an unsupported scheme is refused before anything else
  c.vocab_size = json_required_int(j, "vocab_size", file);
  c.hidden_size = json_required_int(j, "hidden_size", file);
  c.intermediate_size = json_required_int(j, "intermediate_size", file);
  c.num_layers = json_required_int(j, "num_hidden_layers", file);
  c.num_heads = json_required_int(j, "num_attention_heads", file);
  c.num_kv_heads = json_int(j, "num_key_value_heads", c.num_heads, file);
  GS_CHECK(c.num_kv_heads > 0, "{}: 'num_key_value_heads' must be positive", file.string());
  c.head_dim = json_int(j, "head_dim", c.hidden_size / c.num_heads, file);
  c.rms_norm_eps = float(json_number(j, "rms_norm_eps", 1e-6, file));
  c.tie_word_embeddings = json_bool(j, "tie_word_embeddings", false, file);
  c.max_position_embeddings = json_int(j, "max_position_embeddings", 4096, file);
  // Qwen2 always has q/k/v biases (its config does not say so); others follow attention_bias.
  // Qwen2-MoE too (its config may say so in qkv_bias).
  c.attention_bias = c.arch == Architecture::Qwen2 ||
                     (c.arch == Architecture::Qwen2Moe && json_bool(j, "qkv_bias", true, file)) ||
                     json_bool(j, "attention_bias", c.arch == Architecture::GptOss, file);
  c.qk_norm = c.arch == Architecture::Qwen3 || c.arch == Architecture::Qwen3Moe;
  c.torch_dtype = parse_torch_dtype(j, file);
  parse_rope(j, file, c);
  detail::parse_family_fields(j, file, c);
  c.bos_token_id = json_int(j, "bos_token_id", -1, file);
  c.eos_token_ids = parse_eos(j, file);
  validate(c, file);
  return c;
}

}  // namespace detail

ModelConfig load_model_config(const fs::path& model_dir) {
  GS_CHECK(fs::is_directory(model_dir), "model directory {} does not exist", model_dir.string());
  ModelConfig c = detail::parse_model_config(read_json_file(model_dir / "config.json"), model_dir / "config.json");
  const fs::path gen = model_dir / "generation_config.json";
  if (fs::exists(gen)) {  // generation_config.json wins for generation, as in HF
    const json g = read_json_file(gen);
    c.bos_token_id = json_int(g, "bos_token_id", c.bos_token_id, gen);
    if (auto eos = parse_eos(g, gen); !eos.empty()) c.eos_token_ids = eos;
  }
  return c;
}

}  // namespace gs
