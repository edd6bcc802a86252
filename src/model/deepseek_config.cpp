// The config.json fields of DeepSeek-V2 / V3 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM):
// multi-head latent attention (q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
// v_head_dim), the mixture of experts (n_routed_experts, n_shared_experts as one dense MLP of
// n_shared * moe_intermediate_size, first_k_dense_replace, moe_layer_freq, the routing of
// topk_method / scoring_func / n_group / topk_group / norm_topk_prob / routed_scaling_factor),
// and YaRN rope with DeepSeek's mscale / mscale_all_dim. A field graphserve cannot honour is an
// error naming the file and the field.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/json_file.h"
#include "model/model_config.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A required positive integer, small enough that the products of dims cannot overflow.
int positive(const json& j, const char* key, const fs::path& file) {
  const int v = json_required_int(j, key, file);
  GS_CHECK(v <= (1 << 16), "{}: '{}' is {}, at most 65536", file.string(), key, v);
  return v;
}

std::string string_field(const json& j, const char* key, const std::string& fallback, const fs::path& file) {
  if (!json_is_set(j, key)) return fallback;
  GS_CHECK(j.at(key).is_string(), "{}: '{}' must be a string, got {}", file.string(), key, j.at(key).dump());
  return j.at(key).get<std::string>();
}

// YaRN's magnitude scale of DeepSeek (and HF): 0.1 mscale ln(factor) + 1 for factor > 1.
double yarn_mscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

// The rope_scaling / rope_parameters object, or null.
const json* rope_scaling(const json& j) {
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (json_is_set(j, key) && j.at(key).is_object()) return &j.at(key);
  return nullptr;
}

void parse_mla(const json& j, const fs::path& file, ModelConfig& c) {
  MlaConfig& m = c.mla;
  m.q_lora_rank = json_is_set(j, "q_lora_rank") ? positive(j, "q_lora_rank", file) : 0;
  m.kv_lora_rank = positive(j, "kv_lora_rank", file);
  m.qk_nope_head_dim = positive(j, "qk_nope_head_dim", file);
  m.qk_rope_head_dim = positive(j, "qk_rope_head_dim", file);
  m.v_head_dim = positive(j, "v_head_dim", file);
  GS_CHECK(m.qk_rope_head_dim % 2 == 0, "{}: 'qk_rope_head_dim' must be even, got {}", file.string(),
           m.qk_rope_head_dim);
  // HF's DeepSeek-V2 always rotates interleaved pairs; V3 says so in rope_interleave.
  m.rope_interleave = c.arch == Architecture::DeepseekV2 || json_bool(j, "rope_interleave", true, file);
  GS_CHECK(!c.attention_bias, "{}: 'attention_bias' true is not supported for DeepSeek models", file.string());
  // Every head has its own k_nope and v: num_key_value_heads says nothing about MLA's cache.
  c.num_kv_heads = c.num_heads;
  c.head_dim = m.qk_head_dim();
  c.rope.head_dim = m.qk_rope_head_dim;
  m.softmax_scale = float(1.0 / std::sqrt(double(m.qk_head_dim())));
  if (c.rope.yarn_factor > 0) {
    // YaRN's attention factor (detail::parse_yarn: mscale / mscale_all_dim's ratio) scales cos /
    // sin of the rotated part only, not the whole softmax; the softmax gets DeepSeek's
    // mscale(factor, mscale_all_dim)^2.
    m.rope_scale = c.rope_attention_factor;
    c.rope_attention_factor = 1.0f;
    const double softmax = yarn_mscale(c.rope.yarn_factor, json_number(*rope_scaling(j), "mscale_all_dim", 0.0, file));
    m.softmax_scale = float(m.softmax_scale * softmax * softmax);
  }
}

// HF DeepseekV2Moe / DeepseekV3MoE: softmax (V2) or sigmoid (V3) scores; topk_method greedy,
// group_limited_greedy (groups keyed by their best score) or noaux_tc (keyed by their two best
// scores plus e_score_correction_bias, which only selects).
void parse_routing(const json& j, const fs::path& file, ModelConfig& c) {
  const bool v3 = c.arch == Architecture::DeepseekV3;
  MoeConfig& m = c.moe;
  MoeRouting& r = m.routing;
  r.num_experts = m.num_experts;
  r.top_k = positive(j, "num_experts_per_tok", file);
  const std::string scoring = string_field(j, "scoring_func", v3 ? "sigmoid" : "softmax", file);
  GS_CHECK(scoring == "softmax" || scoring == "sigmoid", "{}: 'scoring_func' '{}' is not supported (softmax, sigmoid)",
           file.string(), scoring);
  r.score = scoring == "sigmoid" ? MoeScore::Sigmoid : MoeScore::Softmax;
  const std::string method = string_field(j, "topk_method", v3 ? "noaux_tc" : "greedy", file);
  GS_CHECK(method == "greedy" || method == "group_limited_greedy" || method == "noaux_tc",
           "{}: 'topk_method' '{}' is not supported (greedy, group_limited_greedy, noaux_tc)", file.string(), method);
  if (method != "greedy") {
    r.n_group = positive(j, "n_group", file);
    r.topk_group = positive(j, "topk_group", file);
    GS_CHECK(r.n_group <= 64 && m.num_experts % r.n_group == 0 && r.topk_group <= r.n_group,
             "{}: 'n_group' {} must divide the {} experts (at most 64 groups) and 'topk_group' {} be at most n_group",
             file.string(), r.n_group, m.num_experts, r.topk_group);
    GS_CHECK(r.top_k <= r.topk_group * (m.num_experts / r.n_group),
             "{}: 'num_experts_per_tok' {} exceeds the experts of the {} groups kept", file.string(), r.top_k,
             r.topk_group);
    r.group_key = method == "noaux_tc" ? MoeGroupKey::TopTwoSum : MoeGroupKey::Max;
  }
  m.score_bias = method == "noaux_tc";
  r.renormalize = json_bool(j, "norm_topk_prob", v3, file);
  r.scaling = float(json_number(j, "routed_scaling_factor", 1.0, file));
  GS_CHECK(r.scaling > 0, "{}: 'routed_scaling_factor' must be positive", file.string());
  GS_CHECK(r.num_experts <= kMaxMoeExperts && r.top_k <= r.num_experts && r.top_k <= kMaxMoeTopK,
           "{}: {} experts, top {}: graphserve supports up to {} experts and top {}", file.string(), r.num_experts,
           r.top_k, kMaxMoeExperts, kMaxMoeTopK);
}

void parse_moe(const json& j, const fs::path& file, ModelConfig& c) {
  MoeConfig& m = c.moe;
  if (!json_is_set(j, "n_routed_experts")) return;  // a dense DeepSeek
  m.num_experts = positive(j, "n_routed_experts", file);
  m.expert_intermediate = positive(j, "moe_intermediate_size", file);
  const int shared = json_is_set(j, "n_shared_experts") ? json_int(j, "n_shared_experts", 0, file) : 0;
  GS_CHECK(shared >= 0, "{}: 'n_shared_experts' must be >= 0", file.string());
  m.shared_intermediate = shared * m.expert_intermediate;
  const int first_dense = json_int(j, "first_k_dense_replace", 0, file);
  const int freq = json_int(j, "moe_layer_freq", 1, file);
  GS_CHECK(first_dense >= 0 && freq >= 1, "{}: 'first_k_dense_replace' must be >= 0 and 'moe_layer_freq' >= 1",
           file.string());
  GS_CHECK(json_int(j, "ep_size", 1, file) == 1,
           "{}: 'ep_size' other than 1 is not supported (graphserve places every expert itself)", file.string());
  m.sparse_layers.assign(size_t(c.num_layers), false);
  for (int l = first_dense; l < c.num_layers; ++l) m.sparse_layers[size_t(l)] = l % freq == 0;
  parse_routing(j, file, c);
}

}  // namespace

namespace detail {

void parse_deepseek_fields(const json& j, const fs::path& file, ModelConfig& c) {
  if (c.arch != Architecture::DeepseekV2 && c.arch != Architecture::DeepseekV3) {
    GS_CHECK(!json_is_set(j, "kv_lora_rank"),
             "{}: 'kv_lora_rank' (multi-head latent attention) is only supported for "
             "DeepseekV2ForCausalLM and DeepseekV3ForCausalLM",
             file.string());
    return;
  }
  parse_mla(j, file, c);
  parse_moe(j, file, c);
}

int64_t mla_attention_parameters(const ModelConfig& c) {
  const MlaConfig& m = c.mla;
  const int64_t H = c.hidden_size, h = c.num_heads, L = m.kv_lora_rank;
  const int64_t q = m.q_lora_rank > 0 ? H * m.q_lora_rank + m.q_lora_rank + int64_t(m.q_lora_rank) * h * m.qk_head_dim()
                                      : H * h * m.qk_head_dim();
  return q + H * m.latent_dim() + L + L * h * (m.qk_nope_head_dim + m.v_head_dim) + h * m.v_head_dim * H;
}

}  // namespace detail

ModelConfig deepseek_v2_lite_config() {
  // deepseek-ai/DeepSeek-V2-Lite's config.json (the fields graphserve reads).
  static const char* kConfig = R"({
    "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false, "bos_token_id": 100000,
    "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
    "n_shared_experts": 2, "norm_topk_prob": false, "num_attention_heads": 16, "num_experts_per_tok": 6,
    "num_hidden_layers": 27, "num_key_value_heads": 16, "q_lora_rank": null, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_theta": 10000,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "routed_scaling_factor": 1.0, "scoring_func": "softmax", "topk_group": 1, "topk_method": "greedy",
    "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 102400, "tie_word_embeddings": false})";
  return detail::parse_model_config(json::parse(kConfig), "preset deepseek-v2-lite");
}

}  // namespace gs
