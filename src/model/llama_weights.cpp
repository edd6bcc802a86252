// Implements model/llama_weights.h (LlamaWeights).
#include "model/llama_weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/weight_loader.h"

namespace gs {

namespace {

// Llama-family layers on WeightLoader: fused tensors filled from the row ranges of HF tensors.
class Loader : public WeightLoader {
 public:
  using WeightLoader::WeightLoader;

  // q/k/v (and gate/up) fused in the checkpoint (Phi-3), or three (two) tensors.
  // The rank's q, k, v rows (its heads) of the projection `names` ({q, k, v} or Phi-3's fused
  // one three times) into one [q + 2 kv, H] matrix or bias.
  void qkv_parts(const Tensor& dst, const std::string& p, const std::string& kind, bool fused, int64_t H) {
    const int64_t q = cfg_.q_size(), kv = cfg_.kv_size();
    const TpRange qr = tp_.q_rows(), kvr = tp_.kv_rows();
    const int64_t lq = qr.count, lkv = kvr.count, q0 = qr.begin, k0 = kvr.begin;
    const Shape full = H > 0 ? Shape{q + 2 * kv, H} : Shape{q + 2 * kv};
    const WeightInit init = H > 0 ? WeightInit::Uniform : WeightInit::Zeros;
    if (fused) {
      const std::string name = p + "self_attn.qkv_proj." + kind;
      part(dst, 0, name, full, init, H, rows(q0, lq));
      part(dst, lq, name, full, init, H, rows(q + k0, lkv));
      part(dst, lq + lkv, name, full, init, H, rows(q + kv + k0, lkv));
      return;
    }
    auto shape = [H](int64_t n) { return H > 0 ? Shape{n, H} : Shape{n}; };
    part(dst, 0, p + "self_attn.q_proj." + kind, shape(q), init, H, rows(q0, lq));
    part(dst, lq, p + "self_attn.k_proj." + kind, shape(kv), init, H, rows(k0, lkv));
    part(dst, lq + lkv, p + "self_attn.v_proj." + kind, shape(kv), init, H, rows(k0, lkv));
  }
  void attention(LlamaLayerWeights& w, const std::string& p) {
    const int64_t H = cfg_.hidden_size, lqkv = tp_.local.q_size() + 2 * tp_.local.kv_size();
    const bool phi3 = cfg_.arch == Architecture::Phi3;
    w.qkv = proj(p + (phi3 ? "self_attn.qkv_proj" : "self_attn.q_proj"), lqkv, H);
    qkv_parts(w.qkv, p, "weight", phi3, H);
    if (cfg_.attention_bias) {
      w.qkv_bias = alloc({lqkv});
      qkv_parts(w.qkv_bias, p, "bias", false, 0);
    }
  }
  void mlp(LlamaLayerWeights& w, const std::string& p) {
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size;
    const TpRange ir = tp_.inter_rows();
    const int64_t li = ir.count;
    if (cfg_.arch == Architecture::Phi3) {  // gate rows first, as HF's chunk(2)
      w.gate_up = proj(p + "mlp.gate_up_proj", 2 * li, H);
      part(w.gate_up, 0, p + "mlp.gate_up_proj.weight", {2 * I, H}, WeightInit::Uniform, H, rows(ir.begin, li));
      part(w.gate_up, li, p + "mlp.gate_up_proj.weight", {2 * I, H}, WeightInit::Uniform, H, rows(I + ir.begin, li));
    } else {
      w.gate_up = stacked(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", I, H, ir.begin, li);
    }
    w.down = row_parallel(p + "mlp.down_proj.weight", H, I);
  }

  // A sparse layer's experts (Mixtral: block_sparse_moe.experts.N.w1 / w3 / w2; Qwen:
  // mlp.experts.N.gate_proj / up_proj / down_proj), router and shared expert; the rank's channels
  // of every expert (gate / up rows, down columns), the router whole.
  void moe(MoeLayerWeights& w, const std::string& p) {
    const MoeConfig& m = cfg_.moe;
    const int64_t H = cfg_.hidden_size, E = m.num_experts, Is = m.shared_intermediate;
    const bool mixtral = cfg_.arch == Architecture::Mixtral;
    const std::string b = p + (mixtral ? "block_sparse_moe." : "mlp.");
    w.router = matrix(b + "gate.weight", E, H);
    routed_experts(b + "experts.",
                   mixtral ? std::array<std::string, 3>{"w1.weight", "w3.weight", "w2.weight"}
                           : std::array<std::string, 3>{"gate_proj.weight", "up_proj.weight", "down_proj.weight"},
                   w.experts_gate_up, w.experts_down);
    if (Is > 0) {  // the compute dtype, as the experts (WeightLoader::proj)
      w.shared_gate_up = stacked(b + "shared_expert.gate_proj.weight", b + "shared_expert.up_proj.weight", Is, H,
                                 tp_.shared_inter_begin, tp_.local.moe.shared_intermediate);
      w.shared_down = row_parallel(b + "shared_expert.down_proj.weight", H, Is);
    }
    if (m.shared_gate) {
      w.shared_gate = alloc({8, H});
      be_.fill_zero(w.shared_gate);
      part(w.shared_gate, 0, b + "shared_expert_gate.weight", {1, H}, WeightInit::Uniform, H);
    }
  }

  LlamaLayerWeights layer(int i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const int64_t H = cfg_.hidden_size;
    LlamaLayerWeights w;
    w.input_norm = norm(p + "input_layernorm.weight", H);
    attention(w, p);
    if (cfg_.qk_norm) {
      w.q_norm = vector(p + "self_attn.q_norm.weight", cfg_.head_dim, WeightInit::Ones);
      w.k_norm = vector(p + "self_attn.k_norm.weight", cfg_.head_dim, WeightInit::Ones);
    }
    w.o_proj = row_parallel(p + "self_attn.o_proj.weight", H, cfg_.q_size());
    if (cfg_.gemma_norms) {
      w.attn_out_norm = norm(p + "post_attention_layernorm.weight", H);
      w.post_norm = norm(p + "pre_feedforward_layernorm.weight", H);
      w.mlp_out_norm = norm(p + "post_feedforward_layernorm.weight", H);
    } else {
      w.post_norm = norm(p + "post_attention_layernorm.weight", H);
    }
    w.k_scale = kv_scale(p, "k");
    w.v_scale = kv_scale(p, "v");
    if (cfg_.arch == Architecture::GptOss)
      load_gpt_oss_layer(cfg_, tp_, be_, src_, p, w);
    else if (cfg_.moe.sparse(i))
      moe(w.moe, p);
    else
      mlp(w, p);
    return w;
  }

  Tensor final_norm() { return norm("model.norm.weight", cfg_.hidden_size); }
};

}  // namespace

LlamaWeights load_llama_weights(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src) {
  Loader l(cfg, tp, backend, src);
  LlamaWeights w;
  // Embedding rows have std 1/sqrt(H), so tied logits of a unit-RMS hidden state are ~N(0, 1).
  w.embed = l.vocab_rows("model.embed_tokens.weight");
  for (int i = 0; i < cfg.num_layers; ++i) w.layers.push_back(l.layer(i));
  w.final_norm = l.final_norm();
  w.lm_head = cfg.tie_word_embeddings ? w.embed : l.vocab_rows("lm_head.weight");
  src.finish();
  return w;
}

}  // namespace gs
