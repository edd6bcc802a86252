// The mixture-of-experts fields of config.json: Mixtral (num_local_experts, softmax top-k,
// always renormalised), Qwen2-MoE (a shared expert with a sigmoid gate) and Qwen3-MoE
// (norm_topk_prob, decoder_sparse_step, mlp_only_layers). A field graphserve cannot honour is
// an error naming the file and the field.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/json_file.h"
#include "model/model_config.h"

namespace gs {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int positive(const json& j, const char* key, const fs::path& file) {
  GS_CHECK(json_is_set(j, key), "{}: '{}' is required", file.string(), key);
  const int v = json_int(j, key, 0, file);
  GS_CHECK(v > 0, "{}: '{}' must be a positive integer, got {}", file.string(), key, v);
  return v;
}

// HF Qwen2/Qwen3-MoE: layer l is sparse unless listed in mlp_only_layers, when (l + 1) is a
// multiple of decoder_sparse_step.
std::vector<bool> qwen_sparse_layers(const json& j, const fs::path& file, int layers) {
  const int step = json_int(j, "decoder_sparse_step", 1, file);
  GS_CHECK(step >= 1, "{}: 'decoder_sparse_step' must be >= 1, got {}", file.string(), step);
  std::vector<bool> sparse(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) sparse[size_t(l)] = (l + 1) % step == 0;
  if (json_is_set(j, "mlp_only_layers")) {
    const json& m = j.at("mlp_only_layers");
    GS_CHECK(m.is_array(), "{}: 'mlp_only_layers' must be a list of layer indices", file.string());
    for (const auto& v : m) {
      GS_CHECK(v.is_number_integer() && v.get<int>() >= 0 && v.get<int>() < layers,
               "{}: 'mlp_only_layers' holds {}, expected layer indices in [0, {})", file.string(), v.dump(), layers);
      sparse[size_t(v.get<int>())] = false;
    }
  }
  return sparse;
}

void check_routing(const fs::path& file, const ModelConfig& c) {
  const MoeRouting& r = c.moe.routing;
  GS_CHECK(r.num_experts <= kMaxMoeExperts, "{}: {} experts: graphserve supports up to {}", file.string(),
           r.num_experts, kMaxMoeExperts);
  GS_CHECK(r.top_k <= r.num_experts && r.top_k <= kMaxMoeTopK,
           "{}: 'num_experts_per_tok' {} must be at most the {} experts (and {})", file.string(), r.top_k,
           r.num_experts, kMaxMoeTopK);
}

}  // namespace

namespace detail {

void parse_moe_fields(const json& j, const fs::path& file, ModelConfig& c) {
  const bool mixtral = c.arch == Architecture::Mixtral;
  const bool qwen = c.arch == Architecture::Qwen2Moe || c.arch == Architecture::Qwen3Moe;
  if (!mixtral && !qwen) return;
  MoeConfig& m = c.moe;
  // The Hub's configs name the count num_local_experts (Mixtral) or num_experts (Qwen);
  // transformers 5 writes either for both.
  const char* primary = mixtral ? "num_local_experts" : "num_experts";
  const char* alias = mixtral ? "num_experts" : "num_local_experts";
  m.num_experts = positive(j, json_is_set(j, primary) || !json_is_set(j, alias) ? primary : alias, file);
  m.routing.num_experts = m.num_experts;
  m.routing.top_k = positive(j, "num_experts_per_tok", file);
  m.routing.score = MoeScore::Softmax;
  if (mixtral) {
    m.expert_intermediate = c.intermediate_size;
    m.routing.renormalize = true;
    m.sparse_layers.assign(size_t(c.num_layers), true);
  } else {
    m.expert_intermediate = positive(j, "moe_intermediate_size", file);
    m.routing.renormalize = json_bool(j, "norm_topk_prob", false, file);
    m.sparse_layers = qwen_sparse_layers(j, file, c.num_layers);
  }
  if (c.arch == Architecture::Qwen2Moe) {
    m.shared_intermediate = positive(j, "shared_expert_intermediate_size", file);
    m.shared_gate = true;
  } else {
    GS_CHECK(!json_is_set(j, "shared_expert_intermediate_size") ||
                 json_int(j, "shared_expert_intermediate_size", 0, file) == 0,
             "{}: 'shared_expert_intermediate_size' is only supported for Qwen2MoeForCausalLM", file.string());
  }
  check_routing(file, c);
}

}  // namespace detail

}  // namespace gs
