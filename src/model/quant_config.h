// QuantConfig: how a model's projection weights are quantized — config.json's
// quantization_config (FP8 checkpoints) or --quantization fp8 (a float checkpoint quantized at
// load). Only FP8 e4m3 is supported; anything else is refused before a byte is loaded.
#pragma once
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace gs {

// Granularity of the weight scales a checkpoint stores next to each FP8 projection weight.
enum class Fp8WeightScales {
  Tensor,   // one scale per tensor (weight_scale [] or [1])
  Channel,  // one per output row (weight_scale [N, 1] or [N])
  Block,    // one per 128 x 128 block (weight_scale_inv / weight_scale [ceil(N/128), ceil(K/128)])
};

struct QuantConfig {
  bool fp8 = false;     // projection weights are FP8 e4m3 on the backends that compute in FP8
  bool online = false;  // quantized at load (--quantization fp8), per output channel
  bool dummy = false;   // dummy weights of an FP8 checkpoint's config: quantized at load in its layout
  bool mxfp4 = false;   // quant_method mxfp4: gpt-oss's experts, dequantized at load (fp8 stays false)
  std::string method;   // "fp8" or "compressed-tensors" (checkpoint), "fp8 (online)"
  Fp8WeightScales scales = Fp8WeightScales::Channel;
  std::string scale_suffix = "weight_scale";  // or "weight_scale_inv" (fp8 with weight_block_size)
  bool static_activations = false;            // input_scale next to each weight (else dynamic per token)
  std::vector<std::string> ignore;            // modules left unquantized: names, or "re:" + regex

  // e.g. "fp8 (compressed-tensors, per-channel weight scales, dynamic per-token activations)"
  std::string describe() const;
  // Whether the projection `module` ("model.layers.0.self_attn.q_proj") is quantized.
  bool quantizes(const std::string& module) const;
};

// config.json's quantization_config (absent or null: none). Throws gs::Error naming `file`, the
// field and its value, and listing the supported schemes.
QuantConfig parse_quant_config(const nlohmann::json& config, const std::filesystem::path& file);

// Applies --quantization (empty: the checkpoint's own; "fp8": FP8, quantized at load unless the
// checkpoint is FP8 already). Throws gs::Error for other values.
void apply_quantization_flag(QuantConfig& q, const std::string& flag);

// One line per supported scheme (graphserve info).
std::vector<std::string> supported_quant_schemes();

}  // namespace gs
