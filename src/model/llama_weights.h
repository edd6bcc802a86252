// LlamaWeights: the tensors of a Llama-family model on the backend, in its compute dtype, with
// q/k/v fused into one [q + 2 kv, hidden] matrix and gate/up into one [2 I, hidden] matrix
// (Phi-3's checkpoints hold them fused already). Gemma 2's RMSNorm weights w are stored as
// 1 + w, so one norm kernel serves every family. In an FP8 model (cfg.quant) the projections
// (qkv, o_proj, gate_up, down) are F8E4M3 with their scales where the backend computes in FP8
// (Backend::fp8_weights), else the compute dtype holding the FP8 values' exact dequantization.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"
#include "model/tp_layout.h"
#include "model/weight_source.h"
#include "ops/backend.h"

namespace gs {

// The MoE block of a sparse layer (cfg.moe): E experts of width I stacked as
// Backend::moe_experts takes them, and the shared expert of width Is.
struct MoeLayerWeights {
  Tensor router;           // [E, H]
  Tensor experts_gate_up;  // [E 2I, H]
  Tensor experts_down;     // [E H, I]
  Tensor shared_gate_up;   // [2 Is, H] or undefined
  Tensor shared_down;      // [H, Is]
  Tensor shared_gate;      // [8, H]: row 0 the shared expert's gate (Qwen2-MoE), zero rows keep the GEMM aligned
  // gpt-oss (model/gpt_oss_weights.cpp), f32: the router's bias [E], the experts' gate/up biases
  // [E, 2I] (gate then up, as experts_gate_up's rows) and down biases [E, H] (rank 0 only when
  // sharded: the ranks' partial sums are reduced).
  Tensor router_bias;
  Tensor experts_gate_up_bias;
  Tensor experts_down_bias;
};

struct LlamaLayerWeights {
  Tensor input_norm;     // [H]
  Tensor qkv;            // [q + 2 kv, H]: rows q_proj, then k_proj, then v_proj
  Tensor qkv_bias;       // [q + 2 kv] (Qwen2) or undefined
  Tensor q_norm;         // [D] (Qwen3) or undefined
  Tensor k_norm;         // [D] (Qwen3) or undefined
  Tensor o_proj;         // [H, q]
  Tensor post_norm;      // [H]: the norm before the MLP (Gemma 2: pre_feedforward_layernorm)
  Tensor attn_out_norm;  // [H]: Gemma 2's post_attention_layernorm (of the attention output), or undefined
  Tensor mlp_out_norm;   // [H]: Gemma 2's post_feedforward_layernorm, or undefined
  Tensor gate_up;        // [2 I, H]: rows gate_proj, then up_proj
  Tensor down;           // [H, I]
  MoeLayerWeights moe;   // a sparse layer's MLP (gate_up and down are then undefined)
  Tensor o_bias;         // [H] (gpt-oss; rank 0 only when sharded) or undefined
  Tensor sinks;          // [local heads] f32: gpt-oss's attention sink logits, or undefined
  // The FP8 KV cache's dequantization scales (attention/kv_cache.h): the checkpoint's, else 1.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

// Shapes are those of the whole model; a tensor-parallel shard holds its rows of q/k/v, gate/up,
// embed and lm_head (vocab rows ceil(V / N)) and its columns of o_proj and down (tp_layout.h).
struct LlamaWeights {
  Tensor embed;  // [V, H]
  std::vector<LlamaLayerWeights> layers;
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H]; the same tensor as embed when tied
};

// Allocates the weights of tensor-parallel shard `tp` (the whole model at size 1) on `backend`
// and fills them from `src` (HF tensor names), reading only the shard's slices.
// gpt-oss's layer tensors beyond Llama's (gpt_oss_weights.cpp): o_proj's bias, the sinks, and
// the MoE block from the Hub's fused, transposed, interleaved expert tensors (or their MXFP4
// blocks), converted into Backend::moe_experts' layout. `p` is the layer's prefix.
void load_gpt_oss_layer(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src,
                        const std::string& p, LlamaLayerWeights& w);

LlamaWeights load_llama_weights(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src);

}  // namespace gs
