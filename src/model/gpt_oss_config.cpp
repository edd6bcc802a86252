// gpt-oss's config.json (GptOssForCausalLM, transformers' gpt_oss): attention sinks on every
// layer, q/k/v and o_proj biases (attention_bias), every MLP a mixture of num_local_experts
// experts (alias experts_per_token for num_experts_per_tok) of width intermediate_size with a
// biased router (softmax over the top-k logits: softmax renormalised), biased experts and the
// clamped SwiGLU of swiglu_limit; sliding and full layers from layer_types (or HF's default:
// even layers sliding); YaRN rope; experts in MXFP4 when quantization_config says so. A field
// graphserve cannot honour is an error naming the file and the field.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/json_file.h"
#include "model/model_config.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int experts_per_token(const json& j, const fs::path& file) {
  const char* key = json_is_set(j, "num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
  GS_CHECK(json_is_set(j, key), "{}: 'num_experts_per_tok' (or 'experts_per_token') is required", file.string());
  const int k = json_int(j, key, 0, file);
  if (json_is_set(j, "num_experts_per_tok") && json_is_set(j, "experts_per_token"))
    GS_CHECK(json_int(j, "experts_per_token", 0, file) == k,
             "{}: 'num_experts_per_tok' {} and 'experts_per_token' {} disagree", file.string(), k,
             json_int(j, "experts_per_token", 0, file));
  return k;
}

}  // namespace

namespace detail {

void parse_gpt_oss_fields(const json& j, const fs::path& file, ModelConfig& c) {
  if (c.arch != Architecture::GptOss) {
    GS_CHECK(!c.quant.mxfp4, "{}: quantization_config quant_method 'mxfp4' is only supported for GptOssForCausalLM",
             file.string());
    return;
  }
  MoeConfig& m = c.moe;
  m.num_experts = json_int(j, "num_local_experts", 0, file);
  GS_CHECK(m.num_experts > 0, "{}: 'num_local_experts' must be a positive integer, got {}", file.string(),
           m.num_experts);
  m.expert_intermediate = c.intermediate_size;
  m.routing.num_experts = m.num_experts;
  m.routing.top_k = experts_per_token(j, file);
  m.routing.score = MoeScore::Softmax;  // HF: softmax of the top-k logits = softmax renormalised over them
  m.routing.renormalize = true;
  GS_CHECK(m.routing.top_k > 0 && m.routing.top_k <= m.num_experts && m.routing.top_k <= kMaxMoeTopK &&
               m.num_experts <= kMaxMoeExperts,
           "{}: {} experts, top {}: graphserve supports up to {} experts and top {} (at most the experts)",
           file.string(), m.num_experts, m.routing.top_k, kMaxMoeExperts, kMaxMoeTopK);
  m.sparse_layers.assign(size_t(c.num_layers), true);
  m.router_bias = true;
  m.expert_bias = true;
  m.swiglu_limit = float(json_number(j, "swiglu_limit", 7.0, file));
  GS_CHECK(m.swiglu_limit > 0, "{}: 'swiglu_limit' must be positive, got {}", file.string(), m.swiglu_limit);
  m.mxfp4_experts = c.quant.mxfp4;
  c.activation = Activation::ClampedSwiglu;
  // HF's GptOssExperts ignore hidden_act (the clamped SwiGLU is fixed); anything but silu says
  // the config means another activation.
  if (json_is_set(j, "hidden_act"))
    GS_CHECK(j.at("hidden_act") == "silu", "{}: 'hidden_act' {} is not supported for GptOssForCausalLM (only silu)",
             file.string(), j.at("hidden_act").dump());
  c.attention_sinks = true;
  c.o_proj_bias = c.attention_bias;
  GS_CHECK(!json_bool(j, "output_router_logits", false, file),
           "{}: 'output_router_logits' true is a training option; graphserve does not return router logits",
           file.string());
}

// HF _compute_yarn_parameters' fields; factor defaults to max_position_embeddings over
// original_max_position_embeddings.
void parse_yarn(const json& scaling, const json& j, const fs::path& file, ModelConfig& c) {
  int original = json_int(scaling, "original_max_position_embeddings", 0, file);
  if (original <= 0) original = json_int(j, "original_max_position_embeddings", 0, file);
  if (original <= 0) original = c.max_position_embeddings;
  GS_CHECK(original > 0, "{}: rope_scaling yarn needs original_max_position_embeddings", file.string());
  double factor = json_number(scaling, "factor", 0.0, file);
  if (factor <= 0) factor = double(c.max_position_embeddings) / original;
  GS_CHECK(factor >= 1.0, "{}: rope_scaling yarn 'factor' must be >= 1, got {}", file.string(), factor);
  c.rope.yarn_factor = float(factor);
  c.rope.yarn_original_max_position = original;
  // HF: `or 32` / `or 1`: 0 and null both take the default.
  const double fast = json_number(scaling, "beta_fast", 0.0, file), slow = json_number(scaling, "beta_slow", 0.0, file);
  c.rope.yarn_beta_fast = float(fast != 0 ? fast : 32.0);
  c.rope.yarn_beta_slow = float(slow != 0 ? slow : 1.0);
  GS_CHECK(c.rope.yarn_beta_fast > 0 && c.rope.yarn_beta_slow > 0,
           "{}: rope_scaling yarn 'beta_fast' and 'beta_slow' must be positive", file.string());
  c.rope.yarn_truncate = json_bool(scaling, "truncate", true, file);
  const double attn = json_number(scaling, "attention_factor", 0.0, file);
  const float mscale = float(json_number(scaling, "mscale", 0.0, file));
  const float mscale_all_dim = float(json_number(scaling, "mscale_all_dim", 0.0, file));
  c.rope_attention_factor = attn > 0 ? float(attn) : yarn_attention_factor(float(factor), mscale, mscale_all_dim);
}

}  // namespace detail

}  // namespace gs
