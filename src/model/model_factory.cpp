// Implements model/model_factory.h.
#include "model/model_factory.h"

#include <cmath>

#include "core/error.h"
#include "core/logging.h"
#include "model/deepseek_model.h"
#include "model/llama_model.h"
#include "model/load_progress.h"
#include "model/presets.h"
#include "model/weight_source.h"

namespace gs {

std::vector<PresetInfo> list_presets() {
  std::vector<PresetInfo> out;
  for (const auto& p : builtin_presets()) out.push_back({p.name, p.description});
  return out;
}

ModelConfig resolve_model_config(const ModelSource& src) {
  ModelConfig cfg;
  if (!src.dir.empty()) {
    cfg = load_model_config(src.dir);
  } else {
    GS_CHECK(src.dummy, "no model given: pass a model directory, or dummy weights with a preset");
    GS_CHECK(!src.preset.empty(), "dummy weights need a preset (see graphserve info --presets)");
    cfg = find_preset(src.preset).config;
  }
  // Dummy weights of an FP8 checkpoint's config are quantized at load in its layout, as vLLM runs
  // them; DeepSeek's FP8 checkpoints load dequantized except their routed experts, so its dummy
  // weights stay float.
  if (src.dummy && cfg.quant.fp8 && !cfg.quant.online) {
    if (cfg.mla.enabled())
      cfg.quant = QuantConfig{};
    else
      cfg.quant.dummy = true;
  }
  apply_quantization_flag(cfg.quant, src.quantization);
  return cfg;
}

AttentionShape attention_shape(const ModelConfig& cfg) {
  return {cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.attention_scale(), cfg.attn_softcap, cfg.attention_sinks};
}

TpLayout tp_layout(const ModelConfig& cfg, const Communicator* comm, bool expert_parallel) {
  return comm ? make_tp_layout(cfg, comm->rank(), comm->world_size(), expert_parallel) : make_tp_layout(cfg, 0, 1);
}

void log_expert_parallel(const ModelConfig& cfg, const TpLayout& tp) {
  if (!cfg.moe.enabled()) {
    if (tp.rank != 0) return;  // one line for the ranks
    spdlog::info("--enable-expert-parallel: {} has no routed experts, so it does not apply", cfg.architecture_name);
  } else if (!tp.sharded()) {
    spdlog::info("--enable-expert-parallel: no effect with --tensor-parallel-size 1 (every expert is on the one rank)");
  } else {
    spdlog::info(
        "MoE: expert parallel, rank {} holds {} of {} at their full width; attention{} sharded as "
        "without the flag",
        tp.rank, experts_str(tp.experts()), cfg.moe.num_experts,
        cfg.moe.shared_intermediate > 0 ? " and the shared expert" : "");
  }
}

std::unique_ptr<PiecewiseModel> create_model(const ModelConfig& cfg, const ModelSource& src, Backend& backend,
                                             AttentionBackend& attention, int max_num_tokens,
                                             const ParallelOptions& parallel) {
  GS_CHECK(max_num_tokens > 0, "max_num_tokens must be positive, got {}", max_num_tokens);
  std::unique_ptr<WeightSource> weights;
  if (src.dummy) {
    weights = make_dummy_source(src.seed, backend);
  } else {
    GS_CHECK(!src.dir.empty(), "no model directory given");
    weights = make_checkpoint_source(src.dir, backend, cfg);
  }
  const int ranks = parallel.comm ? parallel.comm->world_size() : 1;
  if (!parallel.comm || parallel.comm->rank() == 0) {  // one report per load, from the first rank
    const auto weight_bytes = int64_t(dtype_size(backend.compute_dtype()));
    weights = with_load_progress(std::move(weights), cfg.num_parameters() / ranks * weight_bytes, weight_bytes);
  }
  const TpLayout tp = tp_layout(cfg, parallel.comm, parallel.expert_parallel);
  if (parallel.expert_parallel) log_expert_parallel(cfg, tp);
  if (cfg.mla.enabled())
    return create_deepseek_model(cfg, *weights, backend, attention, max_num_tokens, tp, parallel.comm,
                                 parallel.max_logit_rows);
  LlamaWeights w = load_llama_weights(cfg, tp, backend, *weights);
  return std::make_unique<LlamaModel>(cfg, std::move(w), backend, attention, max_num_tokens, tp, parallel.comm,
                                      parallel.max_logit_rows);
}

}  // namespace gs
