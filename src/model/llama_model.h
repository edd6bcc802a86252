// LlamaModel: the Llama-family forward pass (Llama, Mistral, Qwen2, Qwen3, SmolLM, Phi-3,
// Gemma 2) as pieces split at attention.
//
// Gemma 2 adds, in the same pieces: the embedding scaled by sqrt(hidden), RMSNorms of the
// attention and MLP outputs before their residual adds, GeGLU, and soft-capped logits. Each
// layer's sliding window (or none) is passed to attention as a fixed launch argument.
//
// Piece i (0..L): for i > 0, the rest of layer i-1 (o_proj, residual add + post-attention norm,
// SwiGLU MLP); for i < L, the start of layer i (input norm fused with the residual add, the
// fused q/k/v projection, its split into q, k, v with Qwen3 q/k norm and RoPE); piece L ends
// with the final norm. Where the backend defers norms (one token on the GPU), o_proj and down add
// into the residual and the gate/up and QKV projections compute the norm themselves. Attention i runs between pieces i
// and i+1. All activations live in buffers allocated at construction for max_num_tokens rows; a forward of n tokens
// uses their first n rows, so views (and the addresses graphs bake in) are the same for every n.
//
// Mixture of experts (Mixtral, Qwen2/Qwen3-MoE): a sparse layer's MLP is the router's linear,
// Backend::moe_route and Backend::moe_experts (with the shared expert's MLP and gate computed
// before it and added in it); its output takes down's place before the residual add + norm.
// gpt-oss adds o_proj's bias, attention sinks (AttentionBackend::forward_with_sinks), the router's
// bias and the experts' biases and clamped SwiGLU (MoeExpertsArgs). Where norms are deferred, a
// sparse layer's post-attention norm is the router projection's, and where the backend hands it
// off (Backend::moe_norm_handoff) the experts add into the residual and the next QKV projection
// computes its input norm. MoE models' LoRA adapters adapt the attention projections (and the
// MLPs of dense layers), never the experts; under tensor parallelism each rank holds its channels
// of every expert and the block's output is reduced in the residual add + norm.
//
// Tensor parallelism (a communicator of N ranks): the model holds its TpLayout's shard; o_proj
// and down end in an all-reduce of their partial sums (fused with the residual add + norm after
// it where no Gemma 2 norm comes between; a LoRA delta, B (A_r x_r) of the rank's input columns,
// is added to the partial sum before it: shard_lora_adapter), the vocab-parallel embedding in one of
// the residual, and compute_logits gathers every rank's vocabulary columns, so each rank ends
// with the whole logits (and samples the same tokens). Collectives are ops on the stream: the
// pieces and the FULL graph capture them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attention/attention_backend.h"
#include "distributed/communicator.h"
#include "model/llama_weights.h"
#include "model/lora_slots.h"
#include "model/model_config.h"
#include "model/moe_block.h"
#include "model/piecewise_model.h"
#include "model/vocab_parallel.h"

namespace gs {

class LlamaModel final : public PiecewiseModel {
 public:
  // `cfg` is the whole model's config; `tp` the shard `weights` hold (make_tp_layout(cfg, 0, 1):
  // all of it), `comm` its group (nullptr when unsharded). compute_logits takes at most
  // max_logit_rows rows at once when sharded (it sizes the gather buffers).
  LlamaModel(const ModelConfig& cfg, LlamaWeights weights, Backend& backend, AttentionBackend& attention,
             int max_num_tokens, const TpLayout& tp, Communicator* comm, int max_logit_rows);

  int num_pieces() const override { return cfg_.num_layers + 1; }
  void run_piece(int i, const ForwardInputs& in) override;
  void run_attention(int i, const ForwardInputs& in) override;
  void compute_logits(const Tensor& rows, const Tensor& logits) override;
  Tensor final_hidden() const override { return buf_.hidden; }
  // Also builds the persistent decode step where the backend has one for this model.
  void bind_kv_cache(std::vector<KVCacheLayer> layers) override;
  bool run_decode_step(const ForwardInputs& in) override;
  // Also stacks each projection's adapter slots under its weight (LoraSlots::stack_under).
  void bind_lora(LoraSlots* slots) override;

  int max_num_tokens() const { return max_tokens_; }

 private:
  // Persistent activations, each [max_num_tokens, width].
  struct Buffers {
    Tensor residual, hidden, qkv, q, k, v, attn_out, gate_up, act, gathered;
  };
  // Sums a row-parallel projection's partial outputs over the ranks (nothing when unsharded).
  void reduce(const Tensor& t);

  int check_tokens(const ForwardInputs& in) const;
  // The rest of a layer: mlp_in (o_proj, add + norm, gate/up and activation), mlp_out (down, add +
  // the next norm).
  void mlp_in(int layer, const ForwardInputs& in, int n);
  void mlp_out(int layer, const ForwardInputs& in, int n, const Tensor& next_norm);
  // Whether the backend defers this forward's residual norms into the projections after them
  // (Backend::defers_norm; never with LoRA, tensor parallelism or Gemma 2's norms) ...
  bool backend_defers_norm(const ForwardInputs& in, int n) const;
  // ... and whether this model does at every norm: not with experts, whose post-attention norm
  // alone is deferred (into the router's projection, mlp_in).
  bool defers_norm(const ForwardInputs& in, int n) const;
  // Whether sparse layer `layer`'s experts end with the residual add and hand the next layer's
  // input norm to its QKV projection (Backend::moe_norm_handoff; mlp_in): where the norms are
  // deferred and that projection reads the handoff (Backend::reads_norm_handoff).
  bool moe_hands_off_norm(int layer, const ForwardInputs& in, int n) const;
  // Whether o_proj / down and the residual add + norm after it run as one LinearOp (the backend may
  // fuse them) where the backend does not defer the norm: nothing joins the add (no adapter, no
  // all-reduce, no Gemma 2 norm after the projection).
  bool add_norm_in_linear(const ForwardInputs& in, int n, const Tensor& out_norm) const;
  // The model's features the decode-step op does not cover, or "" (ops/decode_step.h).
  std::string decode_step_refusal() const;
  void make_decode_step();
  void start_layer(int layer, const ForwardInputs& in, int n);
  const LoraSlots* lora_slots(const ForwardInputs& in) const;  // null without LoRA in this forward
  // What the residual add + norm after o_proj or down takes over from the op before it: the
  // projection's LoRA expand (lora_proj >= 0, unsharded), or else the tensor-parallel all-reduce
  // of its partial sums (reduce: sharded, after the LoRA expand); neither past Gemma 2's extra
  // norm (out_norm defined).
  struct AddNormJoin {
    int lora_proj = -1;
    bool reduce = false;
  };
  AddNormJoin add_norm_join(const ForwardInputs& in, LoraProj p, const Tensor& out_norm) const;
  // o_proj / down of x into y with its adapters; the LoRA expand or the all-reduce left to the
  // add + norm after it. Returns what that add + norm takes as its x: y, or with LoRA the
  // projection's output as LoraSlots::project() made it.
  Tensor row_parallel_linear(int layer, LoraProj p, const ForwardInputs& in, const Tensor& x, const Tensor& w,
                             const Tensor& y, AddNormJoin after, const Tensor& bias = Tensor());
  // Sharded, without adapters, a bias or Gemma 2's norm after the projection (out_norm): o_proj /
  // down of x with the ranks' partial sums added by the projection itself, then residual += the
  // sum and out = rms_norm(residual) * norm_w (Communicator::project_add_rms_norm: one token on the
  // GPU). False: nothing was done.
  bool linear_peer_sum(const ForwardInputs& in, const Tensor& x, const Tensor& w, const Tensor& bias,
                       const Tensor& out_norm, const Tensor& residual, const Tensor& norm_w, const Tensor& out);
  // residual += x, then out = rms_norm(residual) * w, with what `join` names done first in the same
  // op (LoraSlots::expand with an AddRmsNorm epilogue, Communicator::all_reduce_add_rms_norm: one kernel on
  // the GPU).
  void add_rms_norm(int layer, AddNormJoin join, const ForwardInputs& in, const Tensor& residual, const Tensor& x,
                    const Tensor& w, const Tensor& out, int n);

  ModelConfig cfg_;  // the rank's shapes (tp_.local)
  TpLayout tp_;
  Communicator* comm_;
  VocabParallel vocab_;
  LlamaWeights w_;
  Backend& be_;
  AttentionBackend& attn_;
  int max_tokens_;
  Buffers buf_;
  MoeBlock moe_;  // sparse layers' MLP (MoE models; after mlp_in's norm)
  std::vector<KVCacheLayer> kv_;
  LoraSlots* lora_ = nullptr;
  std::unique_ptr<DecodeStep> decode_step_;  // null: decode always runs the pieces
};

}  // namespace gs
