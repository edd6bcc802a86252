// DeepseekModel: the DeepSeek-V2/V3 forward pass (multi-head latent attention, shared + routed
// experts) as pieces split at attention, like LlamaModel.
//
// Piece i (0..L): for i > 0, the rest of layer i-1 (o_proj, residual add + post-attention norm,
// the dense MLP of the first first_k_dense_replace layers or the MoE block: router, moe_route
// with V3's e_score_correction_bias, the shared experts' MLP and the routed experts); for i < L,
// the start of layer i: q (q_proj, or q_a_proj, q_a_layernorm, q_b_proj) and kv_a_proj_with_mqa
// of the normed hidden state. Attention i is the MLA backend's forward_mla (the latent's norm,
// rope and cache write, then attention into [T, H v]). Activation buffers are allocated at
// construction for max_num_tokens rows, as LlamaModel's.
//
// Tensor parallelism (TpLayout) splits the query heads (q_proj / q_b_proj and kv_b_proj rows,
// o_proj columns, the MLA backend built for the rank's heads), the dense MLP's and every expert's
// channels and the vocabulary, as vLLM does; each rank computes the latent (q_a_proj,
// kv_a_proj_with_mqa) and caches it whole, and the partial sums of o_proj, down and the experts
// meet in the all-reduce before each add + norm.
// FP8 checkpoints load with their weights dequantized to the compute dtype. Refused by name:
// LoRA, --quantization fp8.
#pragma once
#include <memory>
#include <vector>

#include "attention/mla_attention.h"
#include "distributed/communicator.h"
#include "model/model_config.h"
#include "model/piecewise_model.h"
#include "model/tp_layout.h"
#include "model/weight_source.h"

namespace gs {

// The MLA backend's shape for a DeepSeek config.
MlaShape mla_shape(const ModelConfig& cfg);

// The KV cache of one layer: per token num_kv_heads x head_dim values in `planes` tensors (2: K
// and V; 1: MLA's latent rows, in KVCacheLayer::k only).
struct KVLayout {
  int num_kv_heads = 0;
  int head_dim = 0;
  int planes = 2;
  size_t bytes_per_token(DType dt) const { return size_t(planes) * num_kv_heads * head_dim * dtype_size(dt); }
};
KVLayout kv_layout(const ModelConfig& cfg);

// Loads tensor-parallel shard `tp` of a DeepSeek model (the whole model at size 1) from `src`
// onto `backend`. `attention` must be the MLA backend of the backend's device for the shard's
// heads (the runner's make_mla_attention_for); on CUDA the model allocates the kernels' scratch
// (MlaForwardArgs::q_latent, o_latent) for max_num_tokens. A shard needs its group's `comm` and
// gathers the logits of up to max_logit_rows rows.
std::unique_ptr<PiecewiseModel> create_deepseek_model(const ModelConfig& cfg, WeightSource& src, Backend& backend,
                                                      AttentionBackend& attention, int max_num_tokens,
                                                      const TpLayout& tp, Communicator* comm, int max_logit_rows);

}  // namespace gs
