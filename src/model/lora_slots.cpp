// LoraSlots: fused, zero-padded slot layout of PEFT adapters on the device (see the header).
#include "model/lora_slots.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"

namespace gs {

namespace {

// The PEFT targets fused into a projection, in the fused weight's row order.
// The fused expand after each projection (o's and down's: the residual add + norm).
LoraFusedOp fused_op_of(LoraProj p) {
  switch (p) {
    case LoraProj::Qkv: return LoraFusedOp::SplitQkvRope;
    case LoraProj::GateUp: return LoraFusedOp::GatedActivation;
    default: return LoraFusedOp::AddRmsNorm;
  }
}

std::vector<LoraTarget> parts_of(LoraProj p) {
  switch (p) {
    case LoraProj::Qkv: return {LoraTarget::Q, LoraTarget::K, LoraTarget::V};
    case LoraProj::O: return {LoraTarget::O};
    case LoraProj::GateUp: return {LoraTarget::Gate, LoraTarget::Up};
    case LoraProj::Down: return {LoraTarget::Down};
  }
  return {};
}

}  // namespace

LoraSlots::LoraSlots(const ModelConfig& cfg, Backend& backend, int max_loras, int max_rank, int max_num_tokens)
    : cfg_(cfg), be_(backend), max_loras_(max_loras), max_rank_(max_rank) {
  GS_CHECK(max_loras >= 1 && max_rank >= 1, "LoRA needs --max-loras >= 1 and --max-lora-rank >= 1, got {} and {}",
           max_loras, max_rank);
  const DType dt = be_.compute_dtype();
  layers_.resize(size_t(cfg.num_layers));
  for (int l = 0; l < cfg.num_layers; ++l)
    for (int p = 0; p < kNumLoraProjs; ++p) {
      auto& layer = layers_[size_t(l)];
      if (!has_slots(l, LoraProj(p))) continue;
      const auto parts = parts_of(LoraProj(p));
      const int64_t R = int64_t(parts.size()) * max_rank;
      const int64_t K = lora_target_shape(cfg, parts[0]).second;
      int64_t N = 0;
      layer[size_t(p)].parts.n = int(parts.size());
      for (size_t c = 0; c < parts.size(); ++c) {
        layer[size_t(p)].parts.begin[c] = N;
        N += lora_target_shape(cfg, parts[c]).first;
      }
      layer[size_t(p)].a = Tensor::empty({max_loras, R, K}, dt, be_.allocator());
      layer[size_t(p)].bt = Tensor::empty({max_loras, R, N}, dt, be_.allocator());
      be_.fill_zero(layer[size_t(p)].a);
      be_.fill_zero(layer[size_t(p)].bt);
    }
  scratch_ = Tensor::empty({max_num_tokens * 3 * int64_t(max_rank)}, DType::F32, be_.allocator());
  for (int p = 0; p < kNumLoraProjs; ++p) {
    const auto with =
        std::find_if(layers_.begin(), layers_.end(), [p](const auto& l) { return l[size_t(p)].a.defined(); });
    if (with == layers_.end()) continue;  // every layer sparse: no gate/up or down slots
    const Proj& w = (*with)[size_t(p)];
    const int64_t P = lora_stacked_width(max_loras, w.a.dim(1)), width = w.bt.dim(2) + P;
    if (P * w.a.dim(2) * int64_t(dtype_size(dt)) > kMaxStackedBytes) continue;
    for (int n = 1; n <= max_num_tokens; ++n)
      if (be_.lora_stacked(fused_shape(w, fused_op_of(LoraProj(p)), n))) {
        stackable_[size_t(p)] = true;
        stacked_out_elems_ = std::max(stacked_out_elems_, n * width);
      }
  }
  be_.stream().synchronize();
}

bool LoraSlots::has_slots(int layer, LoraProj p) const {
  return !cfg_.moe.sparse(layer) || p == LoraProj::Qkv || p == LoraProj::O;
}

LoraFusedShape LoraSlots::fused_shape(const Proj& w, LoraFusedOp op, int n) const {
  return {.op = op, .tokens = n, .width = w.bt.dim(2), .head_dim = cfg_.head_dim};
}

bool LoraSlots::stacked(const Proj& w, LoraFusedOp op, int n) const {
  return w.stacked_w.defined() && be_.lora_stacked(fused_shape(w, op, n));
}

void LoraSlots::stack_under(int layer, LoraProj p, Tensor& w, Tensor& bias) {
  Proj& pw = layers_.at(size_t(layer))[size_t(p)];
  const int64_t S = max_loras_, R = pw.a.dim(1), K = pw.a.dim(2), N = pw.bt.dim(2), P = lora_stacked_width(S, R);
  // An FP8 base (e4m3 rows with their scales) keeps its own GEMMs: the slot rows are in the
  // compute dtype, so its adapters take lora_shrink beside the projection.
  const bool fp8 = w.scales().defined();
  GS_CHECK(w.ndim() == 2 && w.dim(0) == N && w.dim(1) == K && (fp8 || w.dtype() == pw.a.dtype()),
           "LoRA: layer {} projection {}: weight {} is not [{}, {}]", layer, int(p), w.str(), N, K);
  if (fp8) return;
  if (!stackable_[size_t(p)] || pw.stacked_w.defined()) return;  // never stacked (or already)
  if (!stacked_out_.defined()) stacked_out_ = Tensor::empty({stacked_out_elems_}, DType::F32, be_.allocator());
  const Tensor old_w = w, old_bias = bias;  // alive until the copies out of them are done
  pw.stacked_w = Tensor::empty({N + P, K}, w.dtype(), be_.allocator());
  be_.fill_zero(pw.stacked_w.rows(N, P));
  be_.copy(pw.stacked_w.rows(0, N), w);
  be_.copy(pw.stacked_w.rows(N, S * R), pw.a);
  w = pw.stacked_w.rows(0, N);
  pw.a = pw.stacked_w.rows(N, S * R).prefix({S, R, K});
  if (bias.defined()) {
    pw.stacked_bias = Tensor::empty({N + P}, bias.dtype(), be_.allocator());
    be_.fill_zero(pw.stacked_bias);
    be_.copy(pw.stacked_bias.prefix({N}), bias);
    bias = pw.stacked_bias.prefix({N});
  }
  be_.stream().synchronize();
}

Tensor LoraSlots::project(int layer, LoraProj p, std::optional<LoraFusedOp> op, const Tensor& x, const Tensor& w,
                          const Tensor& bias, const Tensor& y, const Tensor& slots, int n) {
  const Proj& pw = layers_[size_t(layer)][size_t(p)];
  if (op && stacked(pw, *op, n)) {
    const Tensor wide = stacked_out_.prefix({n, pw.stacked_w.dim(0)});
    be_.linear(x, pw.stacked_w, pw.stacked_bias, wide);
    return wide;
  }
  shrink(layer, p, x, slots, n);
  be_.linear(x, w, bias, y);
  return y;
}

Tensor LoraSlots::tmp_for(const Proj& w, const Tensor& y, int n) const {
  return y.row_elems() > w.bt.dim(2) ? Tensor() : tmp(w, n);
}

LoraSlotImage LoraSlots::prepare(const LoraAdapter& ad) const {
  GS_CHECK(ad.rank <= max_rank_ && int(ad.layers.size()) == cfg_.num_layers,
           "LoRA adapter '{}' (rank {}, {} layers) does not fit the slots (max rank {}, {} layers)", ad.name, ad.rank,
           ad.layers.size(), max_rank_, cfg_.num_layers);
  const DType dt = be_.compute_dtype();
  LoraSlotImage img;
  img.name = ad.name;
  for (int l = 0; l < cfg_.num_layers; ++l)
    for (int p = 0; p < kNumLoraProjs; ++p) {
      const Proj& dst = layers_[size_t(l)][size_t(p)];
      if (!dst.a.defined()) continue;
      const int64_t R = dst.a.dim(1), K = dst.a.dim(2), N = dst.bt.dim(2);
      std::vector<float> a(size_t(R * K), 0.0f), bt(size_t(R * N), 0.0f);
      int64_t col0 = 0;
      const auto parts = parts_of(LoraProj(p));
      for (size_t c = 0; c < parts.size(); ++c) {
        const int64_t out = lora_target_shape(cfg_, parts[c]).first;
        if (const auto& m = ad.layers[size_t(l)][size_t(parts[c])]) {
          GS_CHECK(m->a.size() == size_t(ad.rank * K) && m->b.size() == size_t(out * ad.rank),
                   "LoRA adapter '{}': layer {} {} holds {} lora_A and {} lora_B values, the slots take [{}, {}] and "
                   "[{}, {}] (an adapter not sharded for this tensor-parallel rank?)",
                   ad.name, l, lora_target_module(parts[c]), m->a.size(), m->b.size(), ad.rank, K, out, ad.rank);
          const int64_t r0 = int64_t(c) * max_rank_;
          for (int64_t r = 0; r < ad.rank; ++r) {
            std::copy_n(m->a.begin() + r * K, K, a.begin() + (r0 + r) * K);
            for (int64_t o = 0; o < out; ++o)
              bt[size_t((r0 + r) * N + col0 + o)] = ad.scale * m->b[size_t(o * ad.rank + r)];
          }
        }
        col0 += out;
      }
      for (const std::vector<float>* host : {&a, &bt}) {
        img.parts.emplace_back(host->size() * dtype_size(dt));
        convert_host(host->data(), DType::F32, img.parts.back().data(), dt, host->size());
      }
    }
  return img;
}

void LoraSlots::load(int slot, const LoraSlotImage& img) {
  GS_CHECK(slot >= 0 && slot < max_loras_, "LoRA slot {} out of range [0, {})", slot, max_loras_);
  size_t parts = 0;
  for (const auto& layer : layers_)
    for (const Proj& dst : layer) parts += dst.a.defined() ? 2 : 0;
  GS_CHECK(img.parts.size() == parts, "LoRA image '{}' has {} parts, the slots {}", img.name, img.parts.size(), parts);
  const DType dt = be_.compute_dtype();
  size_t i = 0;
  for (const auto& layer : layers_)
    for (const Proj& dst : layer) {
      if (!dst.a.defined()) continue;
      for (const Tensor* t : {&dst.a, &dst.bt}) {
        const Tensor view = t->rows(slot, 1);
        const std::vector<uint8_t>& src = img.parts[i++];
        GS_CHECK(src.size() == view.nbytes(), "LoRA image '{}': part {} has {} bytes, the slot {}", img.name, i - 1,
                 src.size(), view.nbytes());
        be_.copy(view, Tensor::wrap(const_cast<uint8_t*>(src.data()), view.shape(), dt, Device::cpu()));
      }
    }
  be_.stream().synchronize();
}

void LoraSlots::shrink(int layer, LoraProj p, const Tensor& x, const Tensor& slots, int n) {
  const Proj& w = layers_[size_t(layer)][size_t(p)];
  be_.lora_shrink(x, w.a, slots.rows(0, n), tmp(w, n));
}

void LoraSlots::expand(int layer, LoraProj p, const Tensor& y, const Tensor& slots, int n, const LinearEpilogue& then) {
  const Proj& w = layers_[size_t(layer)][size_t(p)];
  GS_CHECK(!std::holds_alternative<AddRmsNorm>(then) || p == LoraProj::O || p == LoraProj::Down,
           "LoRA expand: the residual add + norm follows o or down, not projection {}", int(p));
  be_.lora_expand(tmp_for(w, y, n), w.bt, slots.rows(0, n), y, w.parts, then);
}

}  // namespace gs
