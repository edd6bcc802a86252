// LoraAdapter: a PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors)
// read into host memory, validated against the base model: per layer, an optional (A, B) pair
// for each of the seven projections q/k/v/o/gate/up/down, with W' = W + scale * B A.
#pragma once
#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace gs {

enum class LoraTarget { Q, K, V, O, Gate, Up, Down };
inline constexpr int kNumLoraTargets = 7;
// PEFT's module name of a target: "q_proj", ..., "down_proj".
const char* lora_target_module(LoraTarget t);
// (rows, cols) of the base weight a target adapts: out features, in features.
std::pair<int, int> lora_target_shape(const ModelConfig& cfg, LoraTarget t);

struct LoraMatrices {
  std::vector<float> a;  // [rank, in]
  std::vector<float> b;  // [out, rank]
};

struct LoraAdapter {
  std::string name;
  std::filesystem::path dir;
  int rank = 0;
  float scale = 0.0f;  // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora
  // [layer][target]: absent where the adapter does not touch that projection of that layer.
  std::vector<std::array<std::optional<LoraMatrices>, kNumLoraTargets>> layers;
};

// Reads and checks an adapter: rank in [1, max_rank], target_modules among the seven
// projections, every lora_A / lora_B tensor of the expected shape, pairs complete, none in a
// mixture-of-experts block (its experts, shared expert, router, or the MLP targets of a sparse
// layer). Throws gs::Error naming the file and field (or tensor) at fault.
LoraAdapter load_lora_adapter(const std::string& name, const std::filesystem::path& dir, const ModelConfig& cfg,
                              int max_rank);

}  // namespace gs
