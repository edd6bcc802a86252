// PEFT adapter loading: adapter_config.json fields, then every tensor of adapter_model.safetensors
// named base_model.model.model.layers.<i>.<self_attn|mlp>.<proj>.lora_<A|B>.weight.
#include "model/lora_adapter.h"

#include <fmt/ranges.h>
#include <charconv>
#include <cmath>

#include <regex>

#include "core/dtype.h"
#include "core/error.h"
#include "model/json_file.h"
#include "model/safetensors.h"
#include "model/weight_source.h"

namespace gs {

namespace fs = std::filesystem;

const char* lora_target_module(LoraTarget t) {
  static const char* names[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return names[int(t)];
}

std::pair<int, int> lora_target_shape(const ModelConfig& c, LoraTarget t) {
  const int H = c.hidden_size, I = c.intermediate_size;
  switch (t) {
    case LoraTarget::Q: return {c.q_size(), H};
    case LoraTarget::K:
    case LoraTarget::V: return {c.kv_size(), H};
    case LoraTarget::O: return {H, c.q_size()};
    case LoraTarget::Gate:
    case LoraTarget::Up: return {I, H};
    case LoraTarget::Down: return {H, I};
  }
  return {0, 0};
}

namespace {

std::optional<LoraTarget> target_of(const std::string& module) {
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (module == lora_target_module(LoraTarget(t))) return LoraTarget(t);
  return std::nullopt;
}

// target_modules: a list of projection names (PEFT also allows a regex string: refused).
std::array<bool, kNumLoraTargets> parse_targets(const nlohmann::json& j, const fs::path& file) {
  auto it = j.find("target_modules");
  GS_CHECK(it != j.end() && it->is_array() && !it->empty(),
           "{}: 'target_modules' must be a non-empty list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
           "down_proj",
           file.string());
  std::array<bool, kNumLoraTargets> on{};
  for (const auto& m : *it) {
    GS_CHECK(m.is_string(), "{}: 'target_modules' holds a non-string entry {}", file.string(), m.dump());
    auto t = target_of(m.get<std::string>());
    GS_CHECK(t.has_value(),
             "{}: 'target_modules' entry '{}' is not supported (supported: q_proj, k_proj, v_proj, "
             "o_proj, gate_proj, up_proj, down_proj)",
             file.string(), m.get<std::string>());
    on[size_t(*t)] = true;
  }
  return on;
}

std::vector<float> to_f32(const TensorRef& t, const fs::path& file) {
  size_t n = 1;
  for (int64_t d : t.shape) n *= size_t(d);
  const int64_t bad = first_non_finite(t.data, t.dtype, n);
  GS_CHECK(bad < 0, "{}: tensor '{}' holds a non-finite value (NaN or infinity) at element {}", file.string(), t.name,
           bad);
  std::vector<float> out(n);
  convert_host(t.data, t.dtype, out.data(), DType::F32, n);
  return out;
}

// The decoder layer a tensor name gives, within the model's `num_layers`.
int layer_index(const std::string& digits, const std::string& tensor, int num_layers, const fs::path& file) {
  int layer = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), layer);
  GS_CHECK(ec == std::errc() && end == digits.data() + digits.size() && layer < num_layers,
           "{}: tensor '{}' names layer {}, the model has {}", file.string(), tensor, digits.substr(0, 32), num_layers);
  return layer;
}

bool is_mlp(LoraTarget t) { return t == LoraTarget::Gate || t == LoraTarget::Up || t == LoraTarget::Down; }

// A tensor of a sparse layer's MoE block (Qwen's mlp.experts / mlp.shared_expert / mlp.gate,
// Mixtral's block_sparse_moe, gpt-oss's mlp.router).
bool in_moe_block(const std::string& name) {
  for (const char* s :
       {".experts.", ".shared_expert.", ".shared_expert_gate.", "block_sparse_moe.", ".mlp.gate.", ".mlp.router."})
    if (name.find(s) != std::string::npos) return true;
  return false;
}

void check_shape(const TensorRef& t, int64_t rows, int64_t cols, const fs::path& file) {
  GS_CHECK(t.shape.size() == 2 && t.shape[0] == rows && t.shape[1] == cols,
           "{}: tensor '{}' has shape [{}], expected [{}, {}] for the base model and rank", file.string(), t.name,
           fmt::join(t.shape, ", "), rows, cols);
}

// Where a target's base weight is split under tensor parallelism: its output rows (dim 0, which
// are lora_B's rows) or its input columns (dim 1, lora_A's columns), and the rank's range of them.
WeightSlice shard_of(LoraTarget t, const TpLayout& tp) {
  const auto slice = [](int dim, TpRange r) { return WeightSlice{dim, r.begin, r.count}; };
  switch (t) {
    case LoraTarget::Q: return slice(0, tp.q_rows());
    case LoraTarget::K:
    case LoraTarget::V: return slice(0, tp.kv_rows());
    case LoraTarget::Gate:
    case LoraTarget::Up: return slice(0, tp.inter_rows());
    case LoraTarget::O: return slice(1, tp.q_rows());
    case LoraTarget::Down: return slice(1, tp.inter_rows());
  }
  return {};
}

// `s` of the row-major matrix m of `shape`.
std::vector<float> slice_of(const std::vector<float>& m, const Shape& shape, const WeightSlice& s) {
  const Shape part = s.shape_of(shape);
  const SliceIndex at = s.index_map(shape);
  std::vector<float> out(size_t(part[0] * part[1]));
  for (size_t i = 0; i < out.size(); ++i) out[i] = m[size_t(at(int64_t(i)))];
  return out;
}

}  // namespace

LoraAdapter shard_lora_adapter(LoraAdapter ad, const ModelConfig& cfg, const TpLayout& tp) {
  if (!tp.sharded()) return ad;
  for (auto& layer : ad.layers)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto& m = layer[size_t(t)];
      if (!m) continue;
      const auto [out, in] = lora_target_shape(cfg, LoraTarget(t));
      const WeightSlice s = shard_of(LoraTarget(t), tp);
      if (s.dim == 0)
        m->b = slice_of(m->b, {out, ad.rank}, s);
      else
        m->a = slice_of(m->a, {ad.rank, in}, s);
    }
  return ad;
}

LoraAdapter load_lora_adapter(const std::string& name, const fs::path& dir, const ModelConfig& cfg, int max_rank) {
  const fs::path cfg_file = dir / "adapter_config.json";
  const nlohmann::json j = read_json_file(cfg_file);
  LoraAdapter ad;
  ad.name = name;
  ad.dir = dir;
  ad.rank = json_required_int(j, "r", cfg_file);
  GS_CHECK(ad.rank <= max_rank, "{}: 'r' is {}, above --max-lora-rank {}", cfg_file.string(), ad.rank, max_rank);
  const double alpha = json_number(j, "lora_alpha", ad.rank, cfg_file);
  const bool rslora = json_bool(j, "use_rslora", false, cfg_file);
  ad.scale = float(rslora ? alpha / std::sqrt(double(ad.rank)) : alpha / ad.rank);
  // A scale past this turns any non-zero delta into infinity in F16 / BF16 activations.
  constexpr double kMaxScale = 65504.0;
  GS_CHECK(std::isfinite(alpha) && std::isfinite(ad.scale) && std::fabs(ad.scale) <= kMaxScale,
           "{}: 'lora_alpha' {} gives the scale {} (lora_alpha / {}), beyond +-{}", cfg_file.string(), alpha,
           double(ad.scale), rslora ? "sqrt(r)" : "r", kMaxScale);
  const auto targets = parse_targets(j, cfg_file);
  if (auto b = j.find("bias"); b != j.end() && b->is_string())
    GS_CHECK(*b == "none", "{}: 'bias' is '{}': only 'none' is supported", cfg_file.string(), b->get<std::string>());

  const fs::path st_file = dir / "adapter_model.safetensors";
  const SafetensorsCheckpoint st = SafetensorsCheckpoint::from_file(st_file);
  ad.layers.resize(size_t(cfg.num_layers));
  static const std::regex re(
      R"(^(?:base_model\.model\.)?model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$)");
  int found = 0;
  for (const auto& [tname, ref] : st.tensors()) {
    std::smatch m;
    GS_CHECK(!in_moe_block(tname),
             "{}: tensor '{}' adapts a mixture-of-experts block (an expert, the shared expert or the router): LoRA "
             "is supported on the attention projections and on the MLPs of dense layers",
             st_file.string(), tname);
    GS_CHECK(std::regex_match(tname, m, re),
             "{}: tensor '{}' is not a lora_A / lora_B weight of a decoder layer "
             "projection",
             st_file.string(), tname);
    const int layer = layer_index(m[1].str(), tname, cfg.num_layers, st_file);
    const auto t = target_of(m[2].str());
    GS_CHECK(t && targets[size_t(*t)], "{}: tensor '{}' adapts '{}', which 'target_modules' of {} does not list",
             st_file.string(), tname, m[2].str(), cfg_file.string());
    GS_CHECK(!cfg.moe.sparse(layer) || !is_mlp(*t),
             "{}: tensor '{}' adapts the MLP of layer {}, a mixture-of-experts layer (experts, no dense MLP): LoRA is "
             "supported on the attention projections and on the MLPs of dense layers",
             st_file.string(), tname, layer);
    const auto [out, in] = lora_target_shape(cfg, *t);
    auto& slot = ad.layers[size_t(layer)][size_t(*t)];
    if (!slot) slot.emplace();
    if (m[3] == "A") {
      check_shape(ref, ad.rank, in, st_file);
      slot->a = to_f32(ref, st_file);
    } else {
      check_shape(ref, out, ad.rank, st_file);
      slot->b = to_f32(ref, st_file);
    }
    ++found;
  }
  GS_CHECK(found > 0, "{}: no lora_A / lora_B tensors", st_file.string());
  for (int l = 0; l < cfg.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto& s = ad.layers[size_t(l)][size_t(t)];
      GS_CHECK(!s || (!s->a.empty() && !s->b.empty()), "{}: layer {} {} has lora_{} but no lora_{}", st_file.string(),
               l, lora_target_module(LoraTarget(t)), s && s->a.empty() ? "B" : "A", s && s->a.empty() ? "A" : "B");
    }
  return ad;
}

}  // namespace gs
