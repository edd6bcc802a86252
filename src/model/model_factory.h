// Building a model: from a Hugging Face directory or a built-in dummy preset of real shapes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention/attention_backend.h"
#include "distributed/communicator.h"
#include "model/model_config.h"
#include "model/piecewise_model.h"
#include "model/tp_layout.h"
#include "ops/backend.h"

namespace gs {

struct ModelSource {
  std::string dir;           // HF model directory (load_format auto/safetensors)
  bool dummy = false;        // random weights of `preset`'s shape (or of dir's config.json)
  std::string preset;        // dummy preset name (graphserve info --presets)
  uint64_t seed = 0;         // dummy weights are deterministic by seed
  std::string quantization;  // --quantization: empty (the checkpoint's own) or "fp8" (model/quant_config.h)
};

struct PresetInfo {
  std::string name;
  std::string description;  // e.g. "SmolLM2-135M shape (Llama, 30 layers, GQA 9/3)"
};
std::vector<PresetInfo> list_presets();

// config.json of `src.dir`, or the preset's config. Throws gs::Error naming the problem.
ModelConfig resolve_model_config(const ModelSource& src);

// The attention shape of a model config (heads, kv heads, head_dim, scale).
AttentionShape attention_shape(const ModelConfig& cfg);

// Tensor parallelism: the rank's communicator (nullptr: the whole model on one device) and
// the most rows compute_logits is given at once (sizes the buffers of the logits gather).
struct ParallelOptions {
  Communicator* comm = nullptr;
  int max_logit_rows = 0;
  bool expert_parallel = false;  // --enable-expert-parallel (model/tp_layout.h)
};

// The shapes one rank of `comm` holds (the whole model without a communicator); throws
// gs::Error when the model does not split over that many ranks.
TpLayout tp_layout(const ModelConfig& cfg, const Communicator* comm, bool expert_parallel = false);

// The start-up line on --enable-expert-parallel: the experts rank tp.rank holds, or why the flag
// changes nothing (one rank, or a model without routed experts).
void log_expert_parallel(const ModelConfig& cfg, const TpLayout& tp);

// Loads weights onto `backend` (converted to its compute dtype; q/k/v and gate/up fused; with a
// communicator only this rank's shard, tp_layout.h) and allocates activation buffers for up to
// `max_num_tokens` tokens per forward. `attention` must be built for the rank's heads
// (attention_shape(tp_layout(cfg, comm).local)).
std::unique_ptr<PiecewiseModel> create_model(const ModelConfig& cfg, const ModelSource& src, Backend& backend,
                                             AttentionBackend& attention, int max_num_tokens,
                                             const ParallelOptions& parallel = {});

}  // namespace gs
