// Implements model/deepseek_model.h: DeepseekModel's weights and forward pieces.
#include "model/deepseek_model.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "model/forward_inputs.h"
#include "model/llama_weights.h"
#include "model/moe_block.h"
#include "model/vocab_parallel.h"
#include "model/weight_loader.h"

namespace gs {

namespace {

struct DeepseekLayerWeights {
  Tensor input_norm, post_norm;  // [H]
  Tensor q_proj;                 // [h qk, H] (q_lora_rank 0)
  Tensor q_a, q_a_norm, q_b;     // [qr, H], [qr], [h qk, qr]
  Tensor kv_a, kv_a_norm, kv_b;  // [L + R, H], [L], [h (nope + v), L]
  Tensor o_proj;                 // [H, h v]
  Tensor gate_up, down;          // a dense layer's MLP: [2 I, H], [H, I]
  MoeLayerWeights moe;           // a sparse layer's experts, router and shared experts (no gate)
  Tensor score_bias;             // [E] f32: V3's e_score_correction_bias, or undefined
  float k_scale = 1.0f;          // the checkpoint's scale of an e4m3 latent cache (self_attn.k_scale), else 1
};

struct DeepseekWeights {
  Tensor embed, final_norm, lm_head;
  std::vector<DeepseekLayerWeights> layers;
};

// The weights of tensor-parallel shard `tp` (the whole model at size 1): a rank's query heads
// (q_proj / q_b_proj and kv_b_proj rows, o_proj columns), MLP channels (gate / up rows, down
// columns) of the dense MLP, every routed expert and the shared experts, and vocabulary rows; the
// latent projections (q_a_proj, kv_a_proj_with_mqa), norms and router whole.
// An FP8 checkpoint's weights (DeepSeek-V3's 128x128 blocks, or any layout model/quant_config
// reads) are dequantized to the compute dtype, the MLA kernels reading kv_b_proj themselves; the
// routed experts stay FP8 where WeightLoader::fp8_experts (the same moe_experts as every MoE).
// --quantization fp8 quantizes those routed experts alone, per output channel, at load.
class Loader : public WeightLoader {
 public:
  Loader(const ModelConfig& cfg, const TpLayout& tp, Backend& backend, WeightSource& src)
      : WeightLoader(cfg, tp, backend, src) {
    keep_fp8_ = false;
  }

  void attention(DeepseekLayerWeights& w, const std::string& p) {
    const MlaConfig& m = cfg_.mla;
    const int64_t H = cfg_.hidden_size, h = cfg_.num_heads, lh = tp_.local.num_heads, h0 = tp_.head_begin;
    const int64_t L = m.kv_lora_rank, qk = m.qk_head_dim(), kvb = m.qk_nope_head_dim + m.v_head_dim;
    if (m.q_lora_rank > 0) {
      w.q_a = matrix(p + "self_attn.q_a_proj.weight", m.q_lora_rank, H);
      w.q_a_norm = norm(p + "self_attn.q_a_layernorm.weight", m.q_lora_rank);
      w.q_b = column_parallel(p + "self_attn.q_b_proj.weight", h * qk, m.q_lora_rank, h0 * qk, lh * qk);
    } else {
      w.q_proj = column_parallel(p + "self_attn.q_proj.weight", h * qk, H, h0 * qk, lh * qk);
    }
    w.kv_a = matrix(p + "self_attn.kv_a_proj_with_mqa.weight", m.latent_dim(), H);
    w.kv_a_norm = norm(p + "self_attn.kv_a_layernorm.weight", L);
    w.kv_b = column_parallel(p + "self_attn.kv_b_proj.weight", h * kvb, L, h0 * kvb, lh * kvb);
    w.o_proj = row_parallel(p + "self_attn.o_proj.weight", H, h * m.v_head_dim);
    w.k_scale = kv_scale(p, "k");  // the latent cache is one plane, as vLLM's MLA: k's scale
  }

  // mlp.experts.N.{gate,up,down}_proj, mlp.gate (+ V3's e_score_correction_bias), mlp.shared_experts.
  void moe(DeepseekLayerWeights& w, const std::string& p) {
    const MoeConfig& m = cfg_.moe;
    const int64_t H = cfg_.hidden_size, E = m.num_experts, Is = m.shared_intermediate;
    MoeLayerWeights& x = w.moe;
    x.router = matrix(p + "mlp.gate.weight", E, H);
    if (m.score_bias) w.score_bias = vector(p + "mlp.gate.e_score_correction_bias", E, WeightInit::Zeros, DType::F32);
    routed_experts(p + "mlp.experts.", {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}, x.experts_gate_up,
                   x.experts_down);
    if (Is > 0) {
      x.shared_gate_up = stacked(p + "mlp.shared_experts.gate_proj.weight", p + "mlp.shared_experts.up_proj.weight", Is,
                                 H, tp_.shared_inter_begin, tp_.local.moe.shared_intermediate);
      x.shared_down = row_parallel(p + "mlp.shared_experts.down_proj.weight", H, Is);
    }
  }

  DeepseekLayerWeights layer(int i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size;
    DeepseekLayerWeights w;
    w.input_norm = norm(p + "input_layernorm.weight", H);
    w.post_norm = norm(p + "post_attention_layernorm.weight", H);
    attention(w, p);
    if (cfg_.moe.sparse(i)) {
      moe(w, p);
    } else {
      w.gate_up = stacked(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", I, H, tp_.inter_begin,
                          tp_.local.intermediate_size);
      w.down = row_parallel(p + "mlp.down_proj.weight", H, I);
    }
    return w;
  }

  DeepseekWeights load() {
    DeepseekWeights w;
    w.embed = vocab_rows("model.embed_tokens.weight");
    for (int i = 0; i < cfg_.num_layers; ++i) w.layers.push_back(layer(i));
    w.final_norm = norm("model.norm.weight", cfg_.hidden_size);
    w.lm_head = cfg_.tie_word_embeddings ? w.embed : vocab_rows("lm_head.weight");
    src_.finish();
    return w;
  }
};

class DeepseekModel final : public PiecewiseModel {
 public:
  // `cfg` is the whole model's; the model keeps tp.local, its shard's shapes.
  DeepseekModel(const ModelConfig& cfg, DeepseekWeights w, Backend& be, MlaAttentionBackend& attn, int max_tokens,
                const TpLayout& tp, Communicator* comm, int max_logit_rows)
      : cfg_(tp.local),
        tp_(tp),
        comm_(comm),
        vocab_(tp, comm, be, max_logit_rows),
        w_(std::move(w)),
        be_(be),
        attn_(attn),
        max_tokens_(max_tokens) {
    const MlaConfig& m = cfg_.mla;
    const int64_t M = max_tokens, H = cfg_.hidden_size, h = cfg_.num_heads;
    auto alloc = [&](int64_t width, DType dt) { return Tensor::empty({M, width}, dt, be_.allocator()); };
    const DType dt = be_.compute_dtype();
    buf_.residual = alloc(H, DType::F32);
    buf_.hidden = alloc(H, dt);
    if (m.q_lora_rank > 0) buf_.q_a = alloc(m.q_lora_rank, dt), buf_.q_a_normed = alloc(m.q_lora_rank, dt);
    if (!be_.device().is_cpu()) {  // the CUDA kernels' fixed scratch (MlaForwardArgs)
      buf_.q_latent = alloc(h * m.latent_dim(), DType::F32);
      buf_.o_latent = alloc(h * m.kv_lora_rank, DType::F32);
    }
    buf_.q = alloc(h * m.qk_head_dim(), dt);
    buf_.kv_a = alloc(m.latent_dim(), dt);
    buf_.attn_out = alloc(h * m.v_head_dim, dt);
    buf_.gate_up = alloc(2 * cfg_.intermediate_size, dt);
    buf_.act = alloc(cfg_.intermediate_size, dt);
    buf_.gathered = alloc(H, dt);
    if (cfg_.moe.enabled()) moe_ = MoeBlock(cfg_, be_, max_tokens);
  }

  int num_pieces() const override { return cfg_.num_layers + 1; }
  Tensor final_hidden() const override { return buf_.hidden; }

  void run_piece(int i, const ForwardInputs& in) override {
    GS_CHECK(i >= 0 && i < num_pieces(), "piece {} out of range [0, {})", i, num_pieces());
    const int n = check_tokens(in);
    const int L = cfg_.num_layers;
    const Tensor res = buf_.residual.rows(0, n), hid = buf_.hidden.rows(0, n);
    const Tensor& next_norm = i < L ? w_.layers[size_t(i)].input_norm : w_.final_norm;
    if (i == 0) {
      vocab_.embed(be_, in.input_ids.rows(0, n), w_.embed, res);
      be_.rms_norm(res, next_norm, cfg_.rms_norm_eps, hid);
    } else {
      finish_layer(i - 1, n, next_norm);
    }
    if (i < L) start_layer(i, in, n);
  }

  void run_attention(int i, const ForwardInputs& in) override {
    GS_CHECK(i >= 0 && i < cfg_.num_layers, "attention {} out of range [0, {})", i, cfg_.num_layers);
    GS_CHECK(size_t(i) < kv_.size(), "run_attention: bind_kv_cache was not called (layer {})", i);
    GS_CHECK(in.attn, "run_attention: ForwardInputs has no attention metadata");
    const int n = check_tokens(in);
    const DeepseekLayerWeights& w = w_.layers[size_t(i)];
    attn_.forward_mla({.q = buf_.q.rows(0, n),
                       .kv_a = buf_.kv_a.rows(0, n),
                       .kv_a_norm = w.kv_a_norm,
                       .kv_b = w.kv_b,
                       .positions = in.positions.rows(0, n),
                       .out = buf_.attn_out.rows(0, n),
                       .q_latent = buf_.q_latent.defined() ? buf_.q_latent.rows(0, n) : Tensor(),
                       .o_latent = buf_.o_latent.defined() ? buf_.o_latent.rows(0, n) : Tensor()},
                      kv_[size_t(i)], *in.attn);
  }

  void compute_logits(const Tensor& rows, const Tensor& logits) override {
    const int64_t n = rows.numel();
    GS_CHECK(n <= max_tokens_, "compute_logits of {} rows: at most {}", n, max_tokens_);
    GS_CHECK(
        logits.dtype() == DType::F32 && logits.ndim() == 2 && logits.dim(0) == n && logits.dim(1) == cfg_.vocab_size,
        "compute_logits: logits must be f32 [{}, {}], got {}", n, cfg_.vocab_size, logits.str());
    if (n == 0) return;
    const Tensor g = buf_.gathered.rows(0, n);
    be_.gather_rows(buf_.hidden, rows, g);
    vocab_.logits(be_, g, w_.lm_head, logits);
  }

  void bind_kv_cache(std::vector<KVCacheLayer> layers) override {
    GS_CHECK(int(layers.size()) == cfg_.num_layers, "bind_kv_cache: {} layers given, the model has {}", layers.size(),
             cfg_.num_layers);
    kv_ = std::move(layers);
    for (size_t i = 0; i < kv_.size(); ++i)
      if (kv_[i].fp8()) kv_[i].k_scale = w_.layers[i].k_scale;
  }
  void bind_lora(LoraSlots* slots) override {
    GS_CHECK(!slots, "LoRA adapters are not supported for {} (multi-head latent attention)", cfg_.architecture_name);
  }

 private:
  struct Buffers {
    Tensor residual, hidden, q_a, q_a_normed, q, kv_a, attn_out, gate_up, act, gathered, q_latent, o_latent;
  };

  // residual += x (summed over the ranks first: o_proj's, down's and the experts' partial sums
  // under tensor parallelism), out = rms_norm(residual) * w.
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, const Tensor& out) {
    if (tp_.sharded())
      comm_->all_reduce_add_rms_norm(be_, residual, x, w, cfg_.rms_norm_eps, out);
    else
      be_.add_rms_norm(residual, x, w, cfg_.rms_norm_eps, out);
  }

  // out = x w^T, then add_rms_norm(residual, out, w, out); sharded, where the projection sums the
  // ranks' partials itself (Communicator::project_add_rms_norm), as one op.
  void linear_add_rms_norm(const Tensor& x, const Tensor& w, const Tensor& residual, const Tensor& norm_w,
                           const Tensor& out) {
    if (tp_.sharded() && comm_->project_add_rms_norm(be_, x, w, residual, norm_w, cfg_.rms_norm_eps, out)) return;
    be_.linear(x, w, Tensor(), out);
    add_rms_norm(residual, out, norm_w, out);
  }

  int check_tokens(const ForwardInputs& in) const {
    GS_CHECK(in.num_tokens > 0 && in.num_tokens <= max_tokens_, "forward of {} tokens: the model was built for 1..{}",
             in.num_tokens, max_tokens_);
    GS_CHECK(!in.has_lora, "LoRA adapters are not supported for {}", cfg_.architecture_name);
    return in.num_tokens;
  }

  // q and kv_a_proj_with_mqa of the normed hidden state (the MLA backend norms and rotates them).
  void start_layer(int layer, const ForwardInputs&, int n) {
    const DeepseekLayerWeights& w = w_.layers[size_t(layer)];
    const Tensor hid = buf_.hidden.rows(0, n), q = buf_.q.rows(0, n);
    if (cfg_.mla.q_lora_rank > 0) {
      const Tensor qa = buf_.q_a.rows(0, n), qn = buf_.q_a_normed.rows(0, n);
      be_.linear(hid, w.q_a, Tensor(), qa);
      be_.rms_norm(qa, w.q_a_norm, 1e-6f, qn);  // HF builds q_a_layernorm with the default eps
      be_.linear(qn, w.q_b, Tensor(), q);
    } else {
      be_.linear(hid, w.q_proj, Tensor(), q);
    }
    be_.linear(hid, w.kv_a, Tensor(), buf_.kv_a.rows(0, n));
  }

  // o_proj, add + post-attention norm, the MLP or MoE block, add + the next norm.
  void finish_layer(int layer, int n, const Tensor& next_norm) {
    const DeepseekLayerWeights& w = w_.layers[size_t(layer)];
    const Tensor res = buf_.residual.rows(0, n), hid = buf_.hidden.rows(0, n);
    linear_add_rms_norm(buf_.attn_out.rows(0, n), w.o_proj, res, w.post_norm, hid);
    if (cfg_.moe.sparse(layer)) {
      moe_.run(w.moe, w.score_bias, hid, n);
      add_rms_norm(res, moe_.out(n), next_norm, hid);
      return;
    }
    const Tensor act = buf_.act.rows(0, n);
    be_.linear({.x = hid, .w = w.gate_up, .y = buf_.gate_up.rows(0, n), .then = Gated{cfg_.activation, act}});
    linear_add_rms_norm(act, w.down, res, next_norm, hid);
  }

  ModelConfig cfg_;
  TpLayout tp_;
  Communicator* comm_;
  VocabParallel vocab_;
  DeepseekWeights w_;
  Backend& be_;
  MlaAttentionBackend& attn_;
  int max_tokens_;
  Buffers buf_;
  MoeBlock moe_;
  std::vector<KVCacheLayer> kv_;
};

}  // namespace

MlaShape mla_shape(const ModelConfig& cfg) {
  const MlaConfig& m = cfg.mla;
  GS_CHECK(m.enabled(), "{} has no multi-head latent attention", cfg.architecture_name);
  MlaShape s{.num_heads = cfg.num_heads,
             .kv_lora_rank = m.kv_lora_rank,
             .qk_nope_head_dim = m.qk_nope_head_dim,
             .qk_rope_head_dim = m.qk_rope_head_dim,
             .v_head_dim = m.v_head_dim,
             .scale = m.softmax_scale,
             .rope_scale = m.rope_scale,
             .rope_interleave = m.rope_interleave,
             .rope = cfg.rope};
  s.rope.head_dim = m.qk_rope_head_dim;
  return s;
}

KVLayout kv_layout(const ModelConfig& cfg) {
  if (cfg.mla.enabled()) return {1, cfg.mla.latent_dim(), 1};
  return {cfg.num_kv_heads, cfg.head_dim, 2};
}

std::unique_ptr<PiecewiseModel> create_deepseek_model(const ModelConfig& cfg, WeightSource& src, Backend& backend,
                                                      AttentionBackend& attention, int max_num_tokens,
                                                      const TpLayout& tp, Communicator* comm, int max_logit_rows) {
  auto* mla = dynamic_cast<MlaAttentionBackend*>(&attention);
  GS_CHECK(mla, "{} needs the multi-head latent attention backend, got '{}'", cfg.architecture_name, attention.name());
  if (cfg.quant.online)
    spdlog::info(
        "{}: --quantization fp8 quantizes the routed experts at load where their widths allow (the MoE line "
        "says); the other weights stay in {}",
        cfg.architecture_name, dtype_name(backend.compute_dtype()));
  else if (cfg.quant.fp8)
    spdlog::info("{}: the FP8 checkpoint's weights are dequantized to {} at load ({})", cfg.architecture_name,
                 dtype_name(backend.compute_dtype()), cfg.quant.describe());
  Loader loader(cfg, tp, backend, src);
  return std::make_unique<DeepseekModel>(cfg, loader.load(), backend, *mla, max_num_tokens, tp, comm, max_logit_rows);
}

}  // namespace gs
