// Implements model/quant_config.h: quantization_config of FP8 checkpoints and --quantization.
#include "model/quant_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"

namespace gs {

using nlohmann::json;

namespace {

constexpr const char* kSupported =
    "supported: quant_method 'fp8' (per-tensor weight_scale, or weight_block_size [128, 128] with "
    "weight_scale_inv), 'compressed-tensors' format 'float-quantized' (8-bit float weights, strategy "
    "tensor, channel or block [128, 128]), 'mxfp4' (gpt-oss's experts); or --quantization fp8 on a float "
    "checkpoint";

std::string str_field(const json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::vector<std::string> string_list(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  GS_CHECK(it->is_array(), "{}.{} must be a list of module names, got {}", where, key, it->dump());
  for (const auto& e : *it) {
    GS_CHECK(e.is_string(), "{}.{} must be a list of module names, got {}", where, key, it->dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

void parse_fp8(const json& qc, const std::string& where, QuantConfig& q) {
  const std::string fmt = str_field(qc, "fmt", "e4m3");
  GS_CHECK(fmt == "e4m3", "{}.fmt '{}' is not supported (only e4m3)", where, fmt);
  const std::string act = str_field(qc, "activation_scheme", "dynamic");
  GS_CHECK(act == "dynamic" || act == "static", "{}.activation_scheme '{}' is not supported (dynamic or static)", where,
           act);
  q.static_activations = act == "static";
  q.ignore = string_list(qc, "ignored_layers", where);
  for (const auto& m : string_list(qc, "modules_to_not_convert", where)) q.ignore.push_back(m);
  auto blk = qc.find("weight_block_size");
  if (blk == qc.end() || blk->is_null()) {
    q.scales = Fp8WeightScales::Tensor;
    return;
  }
  GS_CHECK(*blk == json::array({128, 128}),
           "{}.weight_block_size {} is not supported (only [128, 128], or none for per-tensor scales)", where,
           blk->dump());
  q.scales = Fp8WeightScales::Block;
  q.scale_suffix = "weight_scale_inv";
}

// One config group of compressed-tensors: FP8 weights of Linear layers.
void parse_ct_group(const std::string& name, const json& g, const std::string& where, QuantConfig& q) {
  const std::string at = where + ".config_groups." + name;
  GS_CHECK(g.is_object(), "{} must be an object", at);
  const auto targets = string_list(g, "targets", at);
  GS_CHECK(targets == std::vector<std::string>{"Linear"}, "{}.targets {} is not supported (only [\"Linear\"])", at,
           g.value("targets", json()).dump());
  auto w = g.find("weights");
  GS_CHECK(w != g.end() && w->is_object(), "{}.weights is missing", at);
  const std::string type = str_field(*w, "type", "?"), bits = str_field(*w, "num_bits", "?");
  GS_CHECK(type == "float" && bits == "8", "{}.weights type '{}' num_bits {} is not supported (only 8-bit float: FP8)",
           at, type, bits);
  const std::string strategy = str_field(*w, "strategy", "?");
  if (strategy == "tensor") {
    q.scales = Fp8WeightScales::Tensor;
  } else if (strategy == "channel") {
    q.scales = Fp8WeightScales::Channel;
  } else if (strategy == "block") {
    const json bs = w->value("block_structure", json());
    GS_CHECK(bs == json::array({128, 128}), "{}.weights.block_structure {} is not supported (only [128, 128])", at,
             bs.dump());
    q.scales = Fp8WeightScales::Block;
  } else {
    fail("{}.weights.strategy '{}' is not supported (tensor, channel or block)", at, strategy);
  }
  GS_CHECK(str_field(*w, "dynamic", "false") == "false", "{}.weights.dynamic must be false", at);
  auto a = g.find("input_activations");
  if (a == g.end() || a->is_null()) return;
  GS_CHECK(str_field(*a, "type", "float") == "float" && str_field(*a, "num_bits", "8") == "8",
           "{}.input_activations must be 8-bit float (FP8), got {}", at, a->dump());
  const bool dynamic = str_field(*a, "dynamic", "false") == "true";
  const std::string as = str_field(*a, "strategy", dynamic ? "token" : "tensor");
  GS_CHECK(dynamic ? as == "token" : as == "tensor",
           "{}.input_activations strategy '{}' (dynamic {}) is not supported (dynamic per token, or static per "
           "tensor)",
           at, as, dynamic);
  q.static_activations = !dynamic;
}

void parse_compressed_tensors(const json& qc, const std::string& where, QuantConfig& q) {
  const std::string format = str_field(qc, "format", "?");
  GS_CHECK(format == "float-quantized" || format == "naive-quantized", "{}.format '{}' is not supported ({})", where,
           format, kSupported);
  auto groups = qc.find("config_groups");
  GS_CHECK(groups != qc.end() && groups->is_object() && groups->size() == 1,
           "{}.config_groups must hold exactly one group (mixed schemes are not supported)", where);
  parse_ct_group(groups->begin().key(), groups->begin().value(), where, q);
  q.ignore = string_list(qc, "ignore", where);
}

}  // namespace

QuantConfig parse_quant_config(const json& config, const std::filesystem::path& file) {
  QuantConfig q;
  auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return q;
  const std::string where = file.string() + ": quantization_config";
  GS_CHECK(it->is_object(), "{} must be an object, got {}", where, it->dump());
  q.method = str_field(*it, "quant_method", "");
  if (q.method == "mxfp4") {  // gpt-oss's experts: dequantized at load (model/gpt_oss_config.cpp checks the model)
    q.mxfp4 = true;
    return q;
  }
  if (q.method == "fp8") {
    parse_fp8(*it, where, q);
  } else if (q.method == "compressed-tensors") {
    parse_compressed_tensors(*it, where, q);
  } else {
    fail("{}.quant_method '{}' is not supported ({})", where, q.method.empty() ? "(missing)" : q.method, kSupported);
  }
  q.fp8 = true;
  return q;
}

void apply_quantization_flag(QuantConfig& q, const std::string& flag) {
  if (flag.empty() || flag == "none" || flag == "None") return;
  GS_CHECK(flag == "fp8",
           "--quantization '{}' is not supported (only fp8: FP8 e4m3 weights, per-channel scales "
           "computed at load; FP8 checkpoints are detected from config.json)",
           flag);
  if (q.fp8) return;  // an FP8 checkpoint keeps its own scales
  q.fp8 = q.online = true;
  q.method = "fp8 (online)";
  q.scales = Fp8WeightScales::Channel;
}

std::string QuantConfig::describe() const {
  if (mxfp4) return "mxfp4 experts (dequantized to the compute dtype at load)";
  if (!fp8) return "none";
  const char* s = scales == Fp8WeightScales::Tensor    ? "per-tensor"
                  : scales == Fp8WeightScales::Channel ? "per-channel"
                                                       : "128x128 block";
  return fmt::format("fp8 e4m3 ({}, {} weight scales, {} activations{})", method, s,
                     static_activations ? "static per-tensor" : "dynamic per-token",
                     dummy ? "; dummy weights quantized at load" : "");
}

bool QuantConfig::quantizes(const std::string& module) const {
  if (!fp8) return false;
  for (const auto& ig : ignore) {
    if (ig.rfind("re:", 0) == 0 ? std::regex_match(module, std::regex(ig.substr(3))) : ig == module) return false;
  }
  return true;
}

std::vector<std::string> supported_quant_schemes() {
  return {"fp8 checkpoint: quant_method fp8, per-tensor weight_scale (+ input_scale), activation_scheme dynamic|static",
          "fp8 checkpoint: quant_method fp8, weight_block_size [128, 128], weight_scale_inv (Qwen3 / DeepSeek layout)",
          "fp8 checkpoint: compressed-tensors float-quantized, weights tensor|channel|block, activations dynamic "
          "per-token or static per-tensor, ignore list",
          "--quantization fp8: a float checkpoint quantized at load (per-channel weight scales, dynamic per-token "
          "activations)",
          "mixtures of experts: the routed experts FP8 too (either way) where the hidden size and each GPU's expert "
          "width are multiples of 128, their activations bf16; elsewhere the experts stay in the compute dtype",
          "--kv-cache-dtype auto (the compute dtype) | fp8 | fp8_e4m3: an e4m3 KV cache, per-layer k/v scales "
          "from the checkpoint (self_attn.k_scale / v_scale, else 1.0)"};
}

}  // namespace gs
