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
#include "model/tp_layout.h"

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

// One tensor-parallel rank's part of `full` (read and checked against the whole model `cfg`),
// vLLM's default (not fully sharded) layout: a column-parallel target (q, k, v, gate, up) keeps
// lora_A whole and the lora_B rows of its base weight's shard; a row-parallel one (o, down) keeps
// the lora_A columns of its base weight's shard and lora_B whole, so that each rank's
// B (A_r x_r) is a term of its partial sum and the all-reduce adds up B (A x). The ranges are the
// base weights' (TpLayout::q_rows, kv_rows, inter_rows); each part's shape is lora_target_shape
// of tp.local. At one rank, `full` itself.
LoraAdapter shard_lora_adapter(LoraAdapter full, const ModelConfig& cfg, const TpLayout& tp);

}  // namespace gs
