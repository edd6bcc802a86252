// Implements model/llama_weights.h (LlamaWeights).
#include "model/llama_weights.h"

#include <fmt/format.h>

namespace gs {

namespace {

// Allocates fused tensors and fills their row ranges from HF tensors.
class Loader {
 public:
  Loader(const ModelConfig& cfg, Backend& backend, WeightSource& src) : cfg_(cfg), be_(backend), src_(src) {}

  Tensor alloc(const Shape& s) { return Tensor::empty(s, be_.compute_dtype(), be_.allocator()); }

  // One HF tensor into rows [row, row + shape[0]) of `dst`.
  void part(const Tensor& dst, int64_t row, const std::string& name, const Shape& shape, WeightInit init,
            int64_t fan_in) {
    src_.load(name, shape, dst.rows(row, shape[0]), init, fan_in);
  }

  Tensor matrix(const std::string& name, int64_t out, int64_t in) {
    Tensor t = alloc({out, in});
    part(t, 0, name, {out, in}, WeightInit::Uniform, in);
    return t;
  }
  Tensor vector(const std::string& name, int64_t n, WeightInit init) {
    Tensor t = alloc({n});
    part(t, 0, name, {n}, init, 0);
    return t;
  }

  // An RMSNorm weight; Gemma's (which multiply by 1 + w) are stored as 1 + w, added in f32.
  Tensor norm(const std::string& name, int64_t n) {
    if (!cfg_.gemma_norms) return vector(name, n, WeightInit::Ones);
    Tensor t = vector(name, n, WeightInit::Zeros);
    std::vector<uint8_t> raw(size_t(n) * dtype_size(t.dtype()));
    be_.copy(Tensor::wrap(raw.data(), t.shape(), t.dtype(), Device::cpu()), t);
    be_.stream().synchronize();
    std::vector<float> w(static_cast<size_t>(n), 0.0f);
    convert_host(raw.data(), t.dtype(), w.data(), DType::F32, size_t(n));
    for (float& x : w) x += 1.0f;
    return be_.upload(w.data(), DType::F32, t.shape(), t.dtype());
  }

  // q/k/v (and gate/up) fused in the checkpoint (Phi-3), or three (two) tensors.
  void attention(LlamaLayerWeights& w, const std::string& p) {
    const int64_t H = cfg_.hidden_size, q = cfg_.q_size(), kv = cfg_.kv_size();
    if (cfg_.arch == Architecture::Phi3) {
      w.qkv = matrix(p + "self_attn.qkv_proj.weight", q + 2 * kv, H);
      return;
    }
    w.qkv = alloc({q + 2 * kv, H});
    part(w.qkv, 0, p + "self_attn.q_proj.weight", {q, H}, WeightInit::Uniform, H);
    part(w.qkv, q, p + "self_attn.k_proj.weight", {kv, H}, WeightInit::Uniform, H);
    part(w.qkv, q + kv, p + "self_attn.v_proj.weight", {kv, H}, WeightInit::Uniform, H);
  }
  void mlp(LlamaLayerWeights& w, const std::string& p) {
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size;
    if (cfg_.arch == Architecture::Phi3) {
      w.gate_up = matrix(p + "mlp.gate_up_proj.weight", 2 * I, H);  // gate rows first, as HF's chunk(2)
    } else {
      w.gate_up = alloc({2 * I, H});
      part(w.gate_up, 0, p + "mlp.gate_proj.weight", {I, H}, WeightInit::Uniform, H);
      part(w.gate_up, I, p + "mlp.up_proj.weight", {I, H}, WeightInit::Uniform, H);
    }
    w.down = matrix(p + "mlp.down_proj.weight", H, I);
  }

  LlamaLayerWeights layer(int i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const int64_t H = cfg_.hidden_size, q = cfg_.q_size(), kv = cfg_.kv_size();
    LlamaLayerWeights w;
    w.input_norm = norm(p + "input_layernorm.weight", H);
    attention(w, p);
    if (cfg_.attention_bias) {
      w.qkv_bias = alloc({q + 2 * kv});
      part(w.qkv_bias, 0, p + "self_attn.q_proj.bias", {q}, WeightInit::Zeros, 0);
      part(w.qkv_bias, q, p + "self_attn.k_proj.bias", {kv}, WeightInit::Zeros, 0);
      part(w.qkv_bias, q + kv, p + "self_attn.v_proj.bias", {kv}, WeightInit::Zeros, 0);
    }
    if (cfg_.qk_norm) {
      w.q_norm = vector(p + "self_attn.q_norm.weight", cfg_.head_dim, WeightInit::Ones);
      w.k_norm = vector(p + "self_attn.k_norm.weight", cfg_.head_dim, WeightInit::Ones);
    }
    w.o_proj = matrix(p + "self_attn.o_proj.weight", H, q);
    if (cfg_.gemma_norms) {
      w.attn_out_norm = norm(p + "post_attention_layernorm.weight", H);
      w.post_norm = norm(p + "pre_feedforward_layernorm.weight", H);
      w.mlp_out_norm = norm(p + "post_feedforward_layernorm.weight", H);
    } else {
      w.post_norm = norm(p + "post_attention_layernorm.weight", H);
    }
    mlp(w, p);
    return w;
  }

  Tensor final_norm() { return norm("model.norm.weight", cfg_.hidden_size); }

 private:
  const ModelConfig& cfg_;
  Backend& be_;
  WeightSource& src_;
};

}  // namespace

LlamaWeights load_llama_weights(const ModelConfig& cfg, Backend& backend, WeightSource& src) {
  Loader l(cfg, backend, src);
  LlamaWeights w;
  // Embedding rows have std 1/sqrt(H), so tied logits of a unit-RMS hidden state are ~N(0, 1).
  w.embed = l.matrix("model.embed_tokens.weight", cfg.vocab_size, cfg.hidden_size);
  for (int i = 0; i < cfg.num_layers; ++i) w.layers.push_back(l.layer(i));
  w.final_norm = l.final_norm();
  w.lm_head = cfg.tie_word_embeddings ? w.embed : l.matrix("lm_head.weight", cfg.vocab_size, cfg.hidden_size);
  src.finish();
  return w;
}

}  // namespace gs
