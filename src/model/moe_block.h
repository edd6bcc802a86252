// MoeBlock: a sparse layer's MLP on the backend's MoE ops (ops/moe.h), shared by the models that
// have one (LlamaModel's Mixtral / Qwen-MoE / gpt-oss, DeepseekModel): the router's linear (with
// gpt-oss's bias), moe_route (with DeepSeek-V3's selection bias), the shared expert's MLP and gate
// computed first, then moe_experts (with gpt-oss's expert biases and clamped SwiGLU) adding them in; under expert
// parallelism (cfg.moe.routing's expert range) the router scores every expert and moe_experts computes the pairs of
// the rank's own, so the output is the rank's partial sum as under width sharding. Its buffers are
// allocated once for max_tokens rows, so a forward of n tokens uses their first n rows and graphs bake in the same
// addresses for every n.
#pragma once
#include "core/tensor.h"
#include "model/llama_weights.h"
#include "model/model_config.h"
#include "ops/backend.h"

namespace gs {

class MoeBlock {
 public:
  MoeBlock() = default;
  // Logs the layout and the backend's MoE kernels once.
  MoeBlock(const ModelConfig& cfg, Backend& backend, int max_tokens);

  // The block of the normed hidden state hid [n, H] into out(n). `score_bias` [E] f32 or undefined.
  // With `norm`, hid is rms_norm(*norm), computed by the router's projection (which may fuse it).
  // With `then`, the residual add + norm after the block too (MoeExpertsArgs::then).
  void run(const MoeLayerWeights& w, const Tensor& score_bias, const Tensor& hid, int n,
           const std::optional<RmsNormInput>& norm = std::nullopt,
           const std::optional<AddRmsNorm>& then = std::nullopt);
  Tensor out(int n) const { return out_.rows(0, n); }

 private:
  const MoeConfig* moe_ = nullptr;
  GatedActivation act_ = GatedActivation::Silu;
  Backend* be_ = nullptr;
  // router logits f32 [M, E], routing ids / weights [M, k], the shared expert's gate_up / act /
  // out and gate logit f32 [M, 8], the block's output, moe_experts' buffers and workspace.
  Tensor router_logits_, topk_ids_, topk_weights_, shared_gate_up_, shared_act_, shared_out_, shared_gate_, out_;
  Tensor pair_act_, pair_out_, index_, workspace_;
};

}  // namespace gs
