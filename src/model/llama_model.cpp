// LlamaModel's forward pieces; Phi-3 and Gemma 2 are flags of the same structure (see the header).
#include "model/llama_model.h"

#include <cmath>

#include "core/error.h"
#include "core/logging.h"
#include "model/lora_slots.h"

namespace gs {

LlamaModel::LlamaModel(const ModelConfig& cfg, LlamaWeights weights, Backend& backend, AttentionBackend& attention,
                       int max_num_tokens, const TpLayout& tp, Communicator* comm, int max_logit_rows)
    : cfg_(tp.local),
      tp_(tp),
      comm_(comm),
      vocab_(tp, comm, backend, max_logit_rows),
      w_(std::move(weights)),
      be_(backend),
      attn_(attention),
      max_tokens_(max_num_tokens) {
  GS_CHECK(max_num_tokens > 0, "max_num_tokens must be positive, got {}", max_num_tokens);
  for (int l = 0; l < cfg.num_layers; ++l)  // the gated_activation ops have no limit: only moe_experts computes it
    GS_CHECK(cfg.activation != Activation::ClampedSwiglu || cfg.moe.sparse(l),
             "layer {}: the clamped SwiGLU (gpt-oss) is supported only in mixture-of-experts layers", l);
  GS_CHECK(!cfg.attention_sinks || attention.supports_sinks(),
           "{} needs attention sinks, which the '{}' attention backend does not support", cfg.architecture_name,
           attention.name());
  GS_CHECK(cfg.num_heads == tp.local.num_heads * tp.size, "the shard's {} heads are not 1/{} of the model's {}",
           tp.local.num_heads, tp.size, cfg.num_heads);
  const int64_t M = max_num_tokens, H = cfg_.hidden_size, I = cfg_.intermediate_size;
  auto alloc = [&](int64_t width) { return Tensor::empty({M, width}, be_.compute_dtype(), be_.allocator()); };
  // The residual stream is kept in f32 (every backend accepts it): in bf16 its 2 L roundings
  // were the largest error against the f32 reference.
  buf_.residual = Tensor::empty({M, H}, DType::F32, be_.allocator());
  buf_.hidden = alloc(H);
  buf_.qkv = alloc(cfg_.q_size() + 2 * cfg_.kv_size());
  buf_.q = alloc(cfg_.q_size());
  buf_.k = alloc(cfg_.kv_size());
  buf_.v = alloc(cfg_.kv_size());
  buf_.attn_out = alloc(cfg_.q_size());
  buf_.gate_up = alloc(2 * I);
  buf_.act = alloc(I);
  buf_.gathered = alloc(H);
  if (cfg_.moe.enabled()) moe_ = MoeBlock(cfg_, be_, max_num_tokens);
}

void LlamaModel::reduce(const Tensor& t) {
  if (tp_.sharded()) comm_->all_reduce(t);
}

int LlamaModel::check_tokens(const ForwardInputs& in) const {
  GS_CHECK(in.num_tokens > 0 && in.num_tokens <= max_tokens_, "forward of {} tokens: the model was built for 1..{}",
           in.num_tokens, max_tokens_);
  return in.num_tokens;
}

void LlamaModel::run_piece(int i, const ForwardInputs& in) {
  GS_CHECK(i >= 0 && i < num_pieces(), "piece {} out of range [0, {})", i, num_pieces());
  const int n = check_tokens(in);
  const int L = cfg_.num_layers;
  const Tensor& next_norm = i < L ? w_.layers[size_t(i)].input_norm : w_.final_norm;
  if (i == 0) {
    vocab_.embed(be_, in.input_ids.rows(0, n), w_.embed, buf_.residual.rows(0, n));
    if (cfg_.gemma_norms) be_.scale(buf_.residual.rows(0, n), std::sqrt(float(cfg_.hidden_size)));
    if (!defers_norm(in, n))  // else layer 0's QKV projection norms the residual
      be_.rms_norm(buf_.residual.rows(0, n), next_norm, cfg_.rms_norm_eps, buf_.hidden.rows(0, n));
  } else {
    mlp_in(i - 1, in, n);
    mlp_out(i - 1, in, n, next_norm);
  }
  if (i < L) start_layer(i, in, n);
}

bool LlamaModel::backend_defers_norm(const ForwardInputs& in, int n) const {
  return !in.has_lora && !tp_.sharded() && !cfg_.gemma_norms && be_.defers_norm(n);
}

bool LlamaModel::defers_norm(const ForwardInputs& in, int n) const {
  return !cfg_.moe.enabled() && backend_defers_norm(in, n);
}

bool LlamaModel::moe_hands_off_norm(int layer, const ForwardInputs& in, int n) const {
  return cfg_.moe.sparse(layer) && layer + 1 < cfg_.num_layers && backend_defers_norm(in, n) &&
         be_.moe_norm_handoff(n, cfg_.hidden_size) &&
         be_.reads_norm_handoff(w_.layers[size_t(layer + 1)].qkv, n, cfg_.qk_norm ? cfg_.head_dim : 0);
}

bool LlamaModel::add_norm_in_linear(const ForwardInputs& in, int n, const Tensor& out_norm) const {
  return !be_.defers_norm(n) && !in.has_lora && !tp_.sharded() && !out_norm.defined();
}

const LoraSlots* LlamaModel::lora_slots(const ForwardInputs& in) const {
  if (!in.has_lora) return nullptr;
  GS_CHECK(lora_ != nullptr && in.lora_slots.defined(), "a forward with LoRA, but no LoRA slots are bound");
  return lora_;
}

void LlamaModel::bind_lora(LoraSlots* slots) {
  lora_ = slots;
  if (!slots) return;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    LlamaLayerWeights& w = w_.layers[size_t(l)];
    slots->stack_under(l, LoraProj::Qkv, w.qkv, w.qkv_bias);
    slots->stack_under(l, LoraProj::O, w.o_proj, w.o_bias);
    if (cfg_.moe.sparse(l)) continue;  // experts take no adapters (load_lora_adapter refuses them)
    Tensor no_bias;
    slots->stack_under(l, LoraProj::GateUp, w.gate_up, no_bias);
    slots->stack_under(l, LoraProj::Down, w.down, no_bias);
  }
}

LlamaModel::AddNormJoin LlamaModel::add_norm_join(const ForwardInputs& in, LoraProj p, const Tensor& out_norm) const {
  if (out_norm.defined()) return {};
  // Sharded, each rank's adapter term is part of its partial sum: the expand runs before the
  // all-reduce, which then joins the add + norm.
  if (lora_slots(in) && !tp_.sharded()) return {.lora_proj = int(p)};
  return {.reduce = tp_.sharded()};
}

void LlamaModel::add_rms_norm(int layer, AddNormJoin join, const ForwardInputs& in, const Tensor& residual,
                              const Tensor& x, const Tensor& w, const Tensor& out, int n) {
  const float eps = cfg_.rms_norm_eps;
  if (join.lora_proj >= 0)
    lora_->expand(layer, LoraProj(join.lora_proj), x, in.lora_slots, n, AddRmsNorm{residual, w, eps, out});
  else if (join.reduce)
    comm_->all_reduce_add_rms_norm(be_, residual, x, w, eps, out);
  else
    be_.add_rms_norm(residual, x, w, eps, out);
}

bool LlamaModel::linear_peer_sum(const ForwardInputs& in, const Tensor& x, const Tensor& w, const Tensor& bias,
                                 const Tensor& out_norm, const Tensor& residual, const Tensor& norm_w,
                                 const Tensor& out) {
  return tp_.sharded() && !lora_slots(in) && !bias.defined() && !out_norm.defined() &&
         comm_->project_add_rms_norm(be_, x, w, residual, norm_w, cfg_.rms_norm_eps, out);
}

// o_proj or down (row-parallel under TP) of x into y with its adapters, leaving the LoRA expand
// or the all-reduce to the add + norm after it where `after` says so.
Tensor LlamaModel::row_parallel_linear(int layer, LoraProj p, const ForwardInputs& in, const Tensor& x, const Tensor& w,
                                       const Tensor& y, AddNormJoin after, const Tensor& bias) {
  const int n = int(x.dim(0));
  // Sharded, x is the rank's input columns and w, A their columns (the adapter's B is whole): y
  // gets W_r x_r + B (A_r x_r), a partial sum like the base projection's, reduced below or in the
  // add + norm. A bias (gpt-oss's o_proj) is rank 0's alone: the reduce adds it once.
  if (lora_slots(in)) {
    const auto op = after.lora_proj >= 0 ? std::optional(LoraFusedOp::AddRmsNorm) : std::nullopt;
    const Tensor out = lora_->project(layer, p, op, x, w, bias, y, in.lora_slots, n);
    if (op) return out;  // unsharded: the add + norm expands it
    lora_->expand(layer, p, y, in.lora_slots, n, {});
  } else {
    be_.linear(x, w, bias, y);
  }
  if (!after.reduce) reduce(y);
  return y;
}

// o_proj, residual add + post-attention norm, then the MLP's gate/up projection and activation
// (with the norm deferred into that projection where the backend takes it), or the experts (the
// norm deferred into the router's projection, which stores the normed row the experts read; and
// where moe_hands_off_norm, the residual add + next norm after them, which mlp_out then skips).
void LlamaModel::mlp_in(int layer, const ForwardInputs& in, int n) {
  const LlamaLayerWeights& w = w_.layers[size_t(layer)];
  const float eps = cfg_.rms_norm_eps;
  const Tensor res = buf_.residual.rows(0, n), hid = buf_.hidden.rows(0, n);
  const Tensor gate_up = buf_.gate_up.rows(0, n), act = buf_.act.rows(0, n);
  const bool sparse = cfg_.moe.sparse(layer);
  // Experts: not behind an o_proj bias (gpt-oss), where the add + norm keeps its own kernel anyway.
  const bool deferred = sparse ? backend_defers_norm(in, n) && !w.o_bias.defined() : defers_norm(in, n);
  if (deferred || add_norm_in_linear(in, n, w.attn_out_norm)) {
    be_.linear({.x = buf_.attn_out.rows(0, n),
                .w = w.o_proj,
                .bias = w.o_bias,
                .y = hid,
                .then = AddRmsNorm{res, w.post_norm, eps, hid, /*next_reads_x=*/!sparse}});
  } else if (!linear_peer_sum(in, buf_.attn_out.rows(0, n), w.o_proj, w.o_bias, w.attn_out_norm, res, w.post_norm,
                              hid)) {
    const AddNormJoin after_o = add_norm_join(in, LoraProj::O, w.attn_out_norm);
    const Tensor o =
        row_parallel_linear(layer, LoraProj::O, in, buf_.attn_out.rows(0, n), w.o_proj, hid, after_o, w.o_bias);
    if (w.attn_out_norm.defined()) be_.rms_norm(hid, w.attn_out_norm, eps, hid);  // Gemma 2 (o is hid)
    add_rms_norm(layer, after_o, in, res, o, w.post_norm, hid, n);
  }
  if (sparse) {
    const auto then = moe_hands_off_norm(layer, in, n)
                          ? std::optional(AddRmsNorm{res, w_.layers[size_t(layer + 1)].input_norm, eps, hid})
                          : std::nullopt;
    moe_.run(w.moe, Tensor(), hid, n, deferred ? std::optional(RmsNormInput{res, w.post_norm, eps}) : std::nullopt,
             then);
  } else if (lora_slots(in)) {  // the adapter adds to the gate/up projection, in the activation's op
    const Tensor y = lora_->project(layer, LoraProj::GateUp, LoraFusedOp::GatedActivation, hid, w.gate_up, Tensor(),
                                    gate_up, in.lora_slots, n);
    lora_->expand(layer, LoraProj::GateUp, y, in.lora_slots, n, Gated{cfg_.activation, act});
  } else {  // deferred: the post-attention norm of the residual, inside the gate/up projection
    const auto norm = deferred ? std::optional(RmsNormInput{res, w.post_norm, eps}) : std::nullopt;
    be_.linear({.x = hid, .norm = norm, .w = w.gate_up, .y = gate_up, .then = Gated{cfg_.activation, act}});
  }
}

// down, then the residual add + the next norm (deferred into the next layer's QKV projection
// where the backend takes it; the final norm never is: compute_logits reads it from hidden).
void LlamaModel::mlp_out(int layer, const ForwardInputs& in, int n, const Tensor& next_norm) {
  const LlamaLayerWeights& w = w_.layers[size_t(layer)];
  const float eps = cfg_.rms_norm_eps;
  const Tensor res = buf_.residual.rows(0, n), hid = buf_.hidden.rows(0, n), act = buf_.act.rows(0, n);
  if (cfg_.moe.sparse(layer)) {
    if (moe_hands_off_norm(layer, in, n)) return;  // the experts did the add (mlp_in)
    // Sharded: the ranks' partial sums, reduced in the add + norm.
    add_rms_norm(layer, {.reduce = tp_.sharded()}, in, res, moe_.out(n), next_norm, hid, n);
    return;
  }
  if ((layer + 1 < cfg_.num_layers && defers_norm(in, n)) || add_norm_in_linear(in, n, w.mlp_out_norm)) {
    be_.linear({.x = act, .w = w.down, .y = hid, .then = AddRmsNorm{res, next_norm, eps, hid}});
    return;
  }
  if (linear_peer_sum(in, act, w.down, Tensor(), w.mlp_out_norm, res, next_norm, hid)) return;
  const AddNormJoin after_down = add_norm_join(in, LoraProj::Down, w.mlp_out_norm);
  const Tensor down = row_parallel_linear(layer, LoraProj::Down, in, act, w.down, hid, after_down);
  if (w.mlp_out_norm.defined()) be_.rms_norm(hid, w.mlp_out_norm, eps, hid);  // Gemma 2 (down is hid)
  add_rms_norm(layer, after_down, in, res, down, next_norm, hid, n);
}

// The fused q/k/v projection of the normed hidden state, then one op that splits it into
// contiguous q, k, v (attention's layout), with Qwen3's q/k norm and RoPE (one op for both
// without LoRA: the backend may fuse them).
void LlamaModel::start_layer(int layer, const ForwardInputs& in, int n) {
  const LlamaLayerWeights& w = w_.layers[size_t(layer)];
  const Tensor qkv = buf_.qkv.rows(0, n), x = buf_.hidden.rows(0, n), pos = in.positions.rows(0, n);
  const Tensor qn = cfg_.qk_norm ? w.q_norm : Tensor(), kn = cfg_.qk_norm ? w.k_norm : Tensor();
  const float eps = cfg_.rms_norm_eps;
  const Tensor q = buf_.q.rows(0, n), k = buf_.k.rows(0, n), v = buf_.v.rows(0, n);
  const SplitQkvRope split{pos, &cfg_.rope, qn, kn, eps, q, k, v};
  if (lora_slots(in)) {  // the adapter adds to the projection, in the epilogue's op (with q/k norm: no stacking)
    const auto op = cfg_.qk_norm ? std::nullopt : std::optional(LoraFusedOp::SplitQkvRope);
    const Tensor y = lora_->project(layer, LoraProj::Qkv, op, x, w.qkv, w.qkv_bias, qkv, in.lora_slots, n);
    lora_->expand(layer, LoraProj::Qkv, y, in.lora_slots, n, split);
  } else {  // deferred: the input norm of the residual (mlp_out, the experts or piece 0 left it)
    const bool deferred = defers_norm(in, n) || (layer > 0 && moe_hands_off_norm(layer - 1, in, n));
    const auto norm =
        deferred ? std::optional(RmsNormInput{buf_.residual.rows(0, n), w.input_norm, eps}) : std::nullopt;
    be_.linear({.x = x, .norm = norm, .w = w.qkv, .bias = w.qkv_bias, .y = qkv, .then = split});
  }
}

void LlamaModel::run_attention(int i, const ForwardInputs& in) {
  GS_CHECK(i >= 0 && i < cfg_.num_layers, "attention {} out of range [0, {})", i, cfg_.num_layers);
  GS_CHECK(size_t(i) < kv_.size(), "run_attention: bind_kv_cache was not called (layer {})", i);
  GS_CHECK(in.attn, "run_attention: ForwardInputs has no attention metadata");
  const int n = check_tokens(in);
  attn_.forward_with_sinks(buf_.q.rows(0, n), buf_.k.rows(0, n), buf_.v.rows(0, n), kv_[size_t(i)], *in.attn,
                           buf_.attn_out.rows(0, n), cfg_.window(i), w_.layers[size_t(i)].sinks);
}

void LlamaModel::compute_logits(const Tensor& rows, const Tensor& logits) {
  const int64_t n = rows.numel();
  GS_CHECK(n <= max_tokens_, "compute_logits of {} rows: at most {}", n, max_tokens_);
  GS_CHECK(logits.dtype() == DType::F32 && logits.ndim() == 2 && logits.dim(0) == n && logits.dim(1) == cfg_.vocab_size,
           "compute_logits: logits must be f32 [{}, {}], got {}", n, cfg_.vocab_size, logits.str());
  if (n == 0) return;
  const Tensor g = buf_.gathered.rows(0, n);
  be_.gather_rows(buf_.hidden, rows, g);
  vocab_.logits(be_, g, w_.lm_head, logits);
  if (cfg_.final_softcap > 0) be_.softcap(logits, cfg_.final_softcap);
}

void LlamaModel::bind_kv_cache(std::vector<KVCacheLayer> layers) {
  GS_CHECK(int(layers.size()) == cfg_.num_layers, "bind_kv_cache: {} layers given, the model has {}", layers.size(),
           cfg_.num_layers);
  kv_ = std::move(layers);
  for (size_t i = 0; i < kv_.size(); ++i)
    if (kv_[i].fp8()) kv_[i].k_scale = w_.layers[i].k_scale, kv_[i].v_scale = w_.layers[i].v_scale;
  make_decode_step();
}

std::string LlamaModel::decode_step_refusal() const {
  if (tp_.sharded()) return "tensor parallelism";
  if (cfg_.moe.enabled()) return "mixture of experts";
  if (cfg_.gemma_norms || cfg_.attn_softcap > 0 || cfg_.final_softcap > 0) return "Gemma 2's norms and soft-capping";
  if (cfg_.attention_sinks) return "attention sinks";
  if (cfg_.activation != Activation::Silu) return "an activation other than SiLU";
  if (!kv_.empty() && kv_[0].fp8()) return "an FP8 KV cache";
  for (int l = 0; l < cfg_.num_layers; ++l)
    if (cfg_.window(l) > 0) return "sliding-window attention";
  for (const LlamaLayerWeights& w : w_.layers)
    if (w.o_bias.defined() || w.attn_out_norm.defined() || w.mlp_out_norm.defined())
      return "o_proj bias or extra norms";
  return "";
}

void LlamaModel::make_decode_step() {
  decode_step_.reset();
  std::string why = decode_step_refusal();
  if (why.empty()) {
    DecodeStepModel m{.hidden_size = cfg_.hidden_size,
                      .intermediate_size = cfg_.intermediate_size,
                      .num_heads = cfg_.num_heads,
                      .num_kv_heads = cfg_.num_kv_heads,
                      .head_dim = cfg_.head_dim,
                      .rms_norm_eps = cfg_.rms_norm_eps,
                      .attention_scale = cfg_.attention_scale(),
                      .rope = cfg_.rope,
                      .embed = w_.embed,
                      .final_norm = w_.final_norm,
                      .layers = {},
                      .residual = buf_.residual,
                      .qkv = buf_.qkv,
                      .attn_out = buf_.attn_out,
                      .act = buf_.act,
                      .hidden = buf_.hidden};
    for (int l = 0; l < cfg_.num_layers; ++l) {
      const LlamaLayerWeights& w = w_.layers[size_t(l)];
      m.layers.push_back({w.input_norm, w.qkv, w.qkv_bias, cfg_.qk_norm ? w.q_norm : Tensor(),
                          cfg_.qk_norm ? w.k_norm : Tensor(), w.o_proj, w.post_norm, w.gate_up, w.down,
                          kv_[size_t(l)]});
    }
    decode_step_ = be_.make_decode_step(m, &why);
  }
  if (decode_step_)
    spdlog::info("decode steps: {}", decode_step_->describe());
  else
    spdlog::info("decode steps: layer by layer (no persistent decode kernel: {})", why);
}

bool LlamaModel::run_decode_step(const ForwardInputs& in) {
  if (!decode_step_ || in.has_lora || in.num_tokens > decode_step_->max_tokens()) return false;
  const int n = check_tokens(in);
  decode_step_->run(
      {.num_tokens = n, .input_ids = in.input_ids.rows(0, n), .positions = in.positions.rows(0, n), .attn = in.attn});
  return true;
}

}  // namespace gs
