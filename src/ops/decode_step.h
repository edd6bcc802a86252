// DecodeStep: a whole decode step of a dense Llama-family model as one op, where a backend has
// one (Backend::make_decode_step; on CUDA the persistent decode kernel, ops/cuda/persistent_decode.h).
//
// For T <= max_tokens() requests of one new token each (token t is request t), run() computes what
// the layered forward computes up to the final norm: the embedding of input_ids into `residual`,
// every layer (RMSNorm, the fused q/k/v projection + bias, Qwen3's q/k norm, RoPE, the new k / v
// written to the paged cache at slot_mapping, attention over each request's context, o_proj,
// the SwiGLU MLP, the residual adds), and hidden = final_norm(residual). compute_logits then
// reads `hidden` as after the layered forward. It covers what the layered path does without
// tensor parallelism, LoRA, MoE, sliding windows, soft-capping, sinks, Gemma 2's norms and FP8
// weights: a model with any of these never makes one.
#pragma once
#include <string>
#include <vector>

#include "attention/attention_metadata.h"
#include "attention/kv_cache.h"
#include "core/tensor.h"
#include "ops/rope.h"

namespace gs {

struct DecodeStepLayer {
  Tensor input_norm, qkv, qkv_bias, q_norm, k_norm, o_proj, post_norm, gate_up, down;  // biases, q/k norm: optional
  KVCacheLayer kv;
};

// The model a DecodeStep runs: shapes, weights, and the persistent activation buffers it writes
// (at least max_tokens rows each): residual f32 [*, H], qkv [*, hq D + 2 hkv D], attn_out
// [*, hq D], act [*, I], hidden [*, H].
struct DecodeStepModel {
  int hidden_size = 0, intermediate_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float rms_norm_eps = 0.0f, attention_scale = 0.0f;
  RopeConfig rope;
  Tensor embed, final_norm;
  std::vector<DecodeStepLayer> layers;
  Tensor residual, qkv, attn_out, act, hidden;
};

struct DecodeStepInputs {
  int num_tokens = 0;  // T (padded), one per request row
  Tensor input_ids, positions;
  const AttentionMetadata* attn = nullptr;  // slot_mapping, seq_lens (0 for padding rows), block_table
};

class DecodeStep {
 public:
  virtual ~DecodeStep() = default;
  virtual int max_tokens() const = 0;
  virtual void run(const DecodeStepInputs& in) = 0;
  virtual std::string describe() const = 0;  // for the start-up log
};

}  // namespace gs
