// Multi-head latent attention (DeepSeek-V2/V3): the attention backend over a latent KV cache.
//
// Per token the model gives q [H, nope + rope] (q_pe not yet rotated) and the output of
// kv_a_proj_with_mqa [kv_lora_rank + rope]. The backend norms the latent c_kv by kv_a_layernorm,
// rotates q_pe and k_pe, and caches one row of kv_lora_rank + rope values a token (c_kv, then
// k_pe), shared by every head: the layer's KVCacheLayer holds only k, [blocks, block_size, 1,
// kv_lora_rank + rope]; v is undefined. kv_b_proj [H (nope + v), kv_lora_rank] holds each head's
// W_UK (its nope rows) and W_UV (its v rows).
//
// Two forms of the same attention:
//   decode (a request with one query): weight absorption. q_lat = W_UK^T q_nope per head, then
//     multi-query attention over the cached rows with scores scale (q_lat . c_kv + q_pe . k_pe)
//     (head dim kv_lora_rank + rope) and values c_kv (kv_lora_rank), then out = W_UV o_lat.
//     It reads only the cache and fixed-size per-token buffers.
//   prefill (a request with more queries): the expanded form. The request's whole context is
//     up-projected (k_nope = W_UK c_kv, v = W_UV c_kv per head) into scratch sized by that
//     context, then causal attention with head dims nope + rope and v.
// Because the prefill form's work and scratch are sized by the batch's contexts, the backend
// declares UNIFORM_SINGLE_TOKEN_DECODE: only batches of one-query requests run in FULL graphs;
// the dispatcher runs every other batch PIECEWISE (attention eager between the pieces).
#pragma once
#include <memory>

#include "attention/attention_backend.h"
#include "ops/rope.h"

namespace gs {

struct MlaShape {
  int num_heads = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  float scale = 0.0f;       // softmax scale (MlaConfig::softmax_scale)
  float rope_scale = 1.0f;  // cos / sin scale of q_pe and k_pe (YaRN's attention factor)
  bool rope_interleave = true;
  RopeConfig rope;            // head_dim = qk_rope_head_dim
  float kv_norm_eps = 1e-6f;  // kv_a_layernorm's (HF builds it with the default eps)

  int latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// One MLA layer's inputs (see the header comment); tensors on the backend's device.
struct MlaForwardArgs {
  Tensor q;          // [T, H (nope + rope)]
  Tensor kv_a;       // [T, kv_lora_rank + rope]
  Tensor kv_a_norm;  // [kv_lora_rank]
  Tensor kv_b;       // [H (nope + v), kv_lora_rank]
  Tensor positions;  // [T] i32
  Tensor out;        // [T, H v]
  // Fixed scratch of the CUDA kernels (allocated by the model for its largest batch; the CPU
  // backend leaves them alone): f32 [T, H, kv_lora_rank + rope] and [T, H, kv_lora_rank].
  Tensor q_latent, o_latent;
};

class MlaAttentionBackend : public AttentionBackend {
 public:
  // The CPU backend's prefill form sizes its scratch by the batch (see above); the CUDA backend
  // runs every request of a FULL graph absorbed and declares ALWAYS (attention/cuda/cuda_mla_attention.h).
  AttentionCGSupport cudagraph_support() const override { return AttentionCGSupport::UNIFORM_SINGLE_TOKEN_DECODE; }
  const MlaShape& shape() const { return shape_; }
  // Writes every token's latent row at its slot, then attends (decode or prefill form per
  // request). Enqueued on the backend's stream.
  virtual void forward_mla(const MlaForwardArgs& a, const KVCacheLayer& cache, const AttentionMetadata& md) = 0;
  // MLA takes forward_mla: its inputs are not per-head q, k, v.
  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const KVCacheLayer& cache,
               const AttentionMetadata& md, const Tensor& out, int window) override;

 protected:
  explicit MlaAttentionBackend(const MlaShape& shape) : shape_(shape) {}
  MlaShape shape_;
};

// The CPU reference (f32); other devices are refused here (the runner makes the CUDA one,
// make_cuda_mla_attention).
std::unique_ptr<MlaAttentionBackend> make_mla_attention(Backend& backend, const MlaShape& shape);

}  // namespace gs
