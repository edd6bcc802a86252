// Weights from a safetensors checkpoint: shape-checked, converted to the compute dtype (FP8
// weights dequantized exactly, model/fp8_checkpoint.h), and
// every tensor of the checkpoint must be claimed by the model (or be a known harmless extra).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/logging.h"
#include "model/fp8_checkpoint.h"
#include "model/mxfp4.h"
#include "model/safetensors.h"
#include "model/weight_source.h"

namespace gs {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class CheckpointSource final : public WeightSource {
 public:
  CheckpointSource(const std::string& dir, Backend& backend, const ModelConfig& cfg)
      : dir_(dir), ckpt_(dir), backend_(backend), cfg_(cfg), fp8_(ckpt_, cfg.quant) {}

  void load(const std::string& name, const Shape& shape, const Tensor& dst, WeightInit, int64_t,
            const WeightSlice& slice) override {
    const TensorRef* t = ckpt_.find(name);
    GS_CHECK(t, "missing tensor '{}' in the checkpoint of {} ({} expects it)", name, dir_, cfg_.architecture_name);
    GS_CHECK(t->shape == shape, "{}: tensor '{}' has shape {}, expected {}", t->file->path().string(), name,
             shape_str(t->shape), shape_str(shape));
    const size_t n = size_t(dst.numel());
    // Copy out first (only the slice: rows are one run, columns one run per row): tensors in
    // a safetensors file need not be aligned for their type.
    const size_t es = dtype_size(t->dtype);
    raw_.resize(n * es);
    const auto* src = static_cast<const uint8_t*>(t->data);
    const size_t run = slice.whole() || slice.dim == 0 ? n : size_t(slice.count);  // columns: of a matrix
    for (size_t i = 0; i < n; i += run)
      std::memcpy(raw_.data() + i * es, src + size_t(slice.full_index(shape, int64_t(i))) * es, run * es);
    const int64_t bad = first_non_finite(raw_.data(), t->dtype, n);
    GS_CHECK(bad < 0,
             "{}: tensor '{}' holds a non-finite value (NaN or infinity) at element {}: the checkpoint is corrupt",
             t->file->path().string(), name, bad);
    host_.resize(n * dtype_size(dst.dtype()));
    if (t->dtype == DType::F8E4M3) {
      for (auto& used : fp8_.dequantize(*t, raw_, slice, deq_)) used_.insert(used);
      convert_host(deq_.data(), DType::F32, host_.data(), dst.dtype(), n);
    } else {
      convert_host(raw_.data(), t->dtype, host_.data(), dst.dtype(), n);
    }
    backend_.copy(dst, Tensor::wrap(host_.data(), dst.shape(), dst.dtype(), Device::cpu()));
    backend_.stream().synchronize();  // host_ is reused by the next tensor
    used_.insert(name);
  }

  std::vector<float> load_host(const std::string& name, const Shape& shape, WeightInit, int64_t,
                               const WeightSlice& slice) override {
    const Shape s = slice.shape_of(shape);
    int64_t n = 1;
    for (int64_t e : s) n *= e;
    std::vector<float> out(static_cast<size_t>(n));
    if (!ckpt_.find(name) && ckpt_.find(name + "_blocks")) {
      mxfp4(name, shape, slice, out);
      return out;
    }
    load(name, shape, Tensor::wrap(out.data(), s, DType::F32, Device::cpu()), WeightInit::Zeros, 0, slice);
    return out;
  }

  std::optional<float> scalar(const std::string& name) override {
    const TensorRef* t = ckpt_.find(name);
    if (!t) return std::nullopt;
    const std::string file = t->file->path().string();
    GS_CHECK(t->dtype == DType::F32 || t->dtype == DType::BF16 || t->dtype == DType::F16,
             "{}: scale '{}' has dtype {}, expected F32, BF16 or F16", file, name, dtype_name(t->dtype));
    int64_t n = 1;
    for (int64_t e : t->shape) n *= e;
    GS_CHECK(n == 1, "{}: scale '{}' has shape {}, expected one element ([] or [1])", file, name, shape_str(t->shape));
    float v = 0.0f;
    convert_host(t->data, t->dtype, &v, DType::F32, 1);
    GS_CHECK(std::isfinite(v) && v > 0.0f, "{}: scale '{}' holds {}, expected a finite value > 0", file, name, v);
    used_.insert(name);
    return v;
  }

  void skip(const std::string& prefix) override { skipped_.insert(prefix); }

  void finish() override {
    for (const auto& [name, t] : ckpt_.tensors()) {
      if (used_.count(name) || skipped(name) || ends_with(name, "rotary_emb.inv_freq")) continue;
      if (Fp8Checkpoint::known_extra(name)) continue;                      // KV scales of another layout
      if (name == "lm_head.weight" && cfg_.tie_word_embeddings) continue;  // tied: the embedding is used
      if (mtp_layer(name)) continue;
      fail("{}: unexpected tensor '{}' (shape {}) for {}", t.file->path().string(), name, shape_str(t.shape),
           cfg_.architecture_name);
    }
  }

 private:
  // Whether a prefix of `name` ending at one of its dots was skip()ped (another rank's expert:
  // its weights and any scales beside them).
  bool skipped(const std::string& name) const {
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
      if (skipped_.count(name.substr(0, dot + 1))) return true;
    return false;
  }

  // `name` from its MXFP4 blocks and scales: whole rows of the leading dimension (slice dim 0) of
  // a [.., K, N] tensor stored as [.., N, K] e2m1 values, dequantized, then transposed back.
  void mxfp4(const std::string& name, const Shape& shape, const WeightSlice& slice, std::vector<float>& out) {
    GS_CHECK(cfg_.quant.mxfp4,
             "{}: tensor '{}' is stored as MXFP4 ('{}_blocks'), but config.json's "
             "quantization_config does not say quant_method mxfp4",
             dir_, name, name);
    GS_CHECK(shape.size() == 3 && (slice.whole() || slice.dim == 0) && shape[1] % 32 == 0,
             "{}: MXFP4 tensor '{}' of shape {}: only [experts, K, N] with K a multiple of 32 is supported", dir_, name,
             shape_str(shape));
    const int64_t K = shape[1], N = shape[2], G = K / 32;
    const TensorRef* b = ckpt_.find(name + "_blocks");
    const TensorRef* sc = ckpt_.find(name + "_scales");
    GS_CHECK(sc, "missing tensor '{}_scales' in the checkpoint of {} (its '{}_blocks' needs it)", name, dir_, name);
    const Shape bs{shape[0], N, G, 16}, ss{shape[0], N, G};
    GS_CHECK(b->dtype == DType::U8 && b->shape == bs && sc->dtype == DType::U8 && sc->shape == ss,
             "{}: MXFP4 tensors '{}_blocks' {} {} and '{}_scales' {} {} must be u8 {} and {} for '{}' {}", dir_, name,
             dtype_name(b->dtype), shape_str(b->shape), name, dtype_name(sc->dtype), shape_str(sc->shape),
             shape_str(bs), shape_str(ss), name, shape_str(shape));
    const int64_t first = slice.whole() ? 0 : slice.begin, count = slice.whole() ? shape[0] : slice.count;
    std::vector<float> deq(static_cast<size_t>(N * K));
    for (int64_t e = 0; e < count; ++e) {
      const auto* blocks = static_cast<const uint8_t*>(b->data) + (first + e) * N * G * 16;
      const auto* scales = static_cast<const uint8_t*>(sc->data) + (first + e) * N * G;
      dequantize_mxfp4(blocks, scales, N, G, deq.data());
      float* o = out.data() + e * K * N;
#pragma omp parallel for collapse(2) if (N * K > 65536)
      for (int64_t r0 = 0; r0 < N; r0 += 32)  // the transpose in 32 x 32 tiles
        for (int64_t c0 = 0; c0 < K; c0 += 32)
          for (int64_t r = r0; r < std::min(r0 + 32, N); ++r)
            for (int64_t c = c0; c < std::min(c0 + 32, K); ++c) o[c * N + r] = deq[size_t(r * K + c)];
    }
    used_.insert(name + "_blocks");
    used_.insert(name + "_scales");
    if (!logged_mxfp4_)
      spdlog::info("{}: the MXFP4 experts are dequantized at load to the compute dtype (no MXFP4 kernels)", dir_);
    logged_mxfp4_ = true;
  }

  // DeepSeek-V3's multi-token-prediction layers (model.layers.L.. past num_hidden_layers), which
  // only speculative decoding would use.
  bool mtp_layer(const std::string& name) const {
    const std::string p = "model.layers.";
    if (cfg_.arch != Architecture::DeepseekV3 || name.compare(0, p.size(), p) != 0) return false;
    return std::atoi(name.c_str() + p.size()) >= cfg_.num_layers;
  }
  std::string dir_;
  SafetensorsCheckpoint ckpt_;
  Backend& backend_;
  ModelConfig cfg_;
  std::set<std::string> used_;
  std::set<std::string> skipped_;  // skip()'s prefixes
  Fp8Checkpoint fp8_;
  std::vector<uint8_t> raw_, host_;
  std::vector<float> deq_;
  bool logged_mxfp4_ = false;
};

}  // namespace

std::unique_ptr<WeightSource> make_checkpoint_source(const std::string& dir, Backend& backend, const ModelConfig& cfg) {
  return std::make_unique<CheckpointSource>(dir, backend, cfg);
}

}  // namespace gs
