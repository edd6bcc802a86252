// PiecewiseModel: a model's forward pass as pieces split at its attention ops (docs/CUDA_GRAPHS.md §2).
//
// forward = piece 0, attention 0, piece 1, attention 1, ..., attention L-1, piece L.
// Pieces hold everything but attention (norms, projections, RoPE, MLP); the attention ops are
// the "splitting ops" that run eagerly between piecewise graphs. A piece reads and writes only
// the model's persistent activation buffers, so it can be captured per padded token count.
#pragma once
#include <vector>

#include "attention/kv_cache.h"
#include "core/tensor.h"
#include "model/forward_inputs.h"

namespace gs {

class LoraSlots;

class PiecewiseModel {
 public:
  virtual ~PiecewiseModel() = default;

  virtual int num_pieces() const = 0;  // number of attention ops + 1
  virtual void run_piece(int i, const ForwardInputs& in) = 0;
  virtual void run_attention(int i, const ForwardInputs& in) = 0;

  // logits [n, vocab] (F32) of hidden rows selected by `rows` (i32 [n]). Persistent buffers only.
  virtual void compute_logits(const Tensor& rows, const Tensor& logits) = 0;
  // The final (normed) hidden states the last forward left, [max_num_tokens, hidden] with its
  // first num_tokens rows valid: what pooling runners read. Undefined: the model cannot pool.
  virtual Tensor final_hidden() const { return Tensor(); }

  // Binds the KV cache (one layer per attention op); called once before the first forward.
  virtual void bind_kv_cache(std::vector<KVCacheLayer> layers) = 0;
  // Binds the LoRA adapter slots, applied after each projection in forwards with has_lora.
  virtual void bind_lora(LoraSlots* slots) = 0;

  // Runs the whole forward of a uniform single-token decode batch (in.num_tokens requests of one
  // token each, no other kind of row) as one op (ops/decode_step.h), leaving what forward()
  // leaves for compute_logits; false, having done nothing, where the model has no such op for it.
  // A FULL graph's body calls it in place of the pieces and attention.
  virtual bool run_decode_step(const ForwardInputs& in) {
    (void)in;
    return false;
  }

  // The eager forward pass (what NONE runs): pieces and attention in order.
  void forward(const ForwardInputs& in) {
    for (int i = 0; i < num_pieces(); ++i) {
      run_piece(i, in);
      if (i + 1 < num_pieces()) run_attention(i, in);
    }
  }
};

}  // namespace gs
