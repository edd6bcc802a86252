// Implements model/fp8_checkpoint.h.
#include "model/fp8_checkpoint.h"

#include <cmath>

#include "core/error.h"

namespace gs {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace

bool Fp8Checkpoint::known_extra(const std::string& name) {
  for (const char* s : {"self_attn.k_scale", "self_attn.v_scale", "k_proj.output_scale", "v_proj.output_scale",
                        "self_attn.attn.k_scale", "self_attn.attn.v_scale"})
    if (ends_with(name, s)) return true;
  return false;
}

// The scale tensor `name` of weight w as f32 [rows, cols] (the grid its layout expects).
std::vector<float> Fp8Checkpoint::scales_of(const TensorRef& w, const std::string& name, int64_t& rows,
                                            int64_t& cols) const {
  const TensorRef* s = ckpt_.find(name);
  const std::string file = w.file->path().string();
  GS_CHECK(s, "{}: FP8 weight '{}' has no scale tensor '{}' ({})", file, w.name, name, quant_.describe());
  GS_CHECK(s->dtype == DType::F32 || s->dtype == DType::BF16 || s->dtype == DType::F16,
           "{}: scale '{}' has dtype {}, expected F32, BF16 or F16", file, name, dtype_name(s->dtype));
  const int64_t N = w.shape[0], K = w.shape[1];
  Shape want;
  switch (quant_.scales) {
    case Fp8WeightScales::Tensor: rows = cols = 1; break;
    case Fp8WeightScales::Channel: rows = N, cols = 1; break;
    case Fp8WeightScales::Block: rows = (N + 127) / 128, cols = (K + 127) / 128; break;
  }
  const bool ok = quant_.scales == Fp8WeightScales::Block ? s->shape == Shape{rows, cols}
                                                          : numel(s->shape) == rows * cols && s->shape.size() <= 2 &&
                                                                (s->shape.empty() || s->shape[0] == rows);
  GS_CHECK(ok, "{}: scale '{}' has shape {}, expected {} for weight {} ({})", file, name, shape_str(s->shape),
           quant_.scales == Fp8WeightScales::Tensor    ? std::string("[] or [1]")
           : quant_.scales == Fp8WeightScales::Channel ? fmt::format("[{}, 1] or [{}]", rows, rows)
                                                       : shape_str({rows, cols}),
           shape_str(w.shape), quant_.describe());
  std::vector<float> out(size_t(rows * cols));
  convert_host(s->data, s->dtype, out.data(), DType::F32, out.size());
  for (float v : out)
    GS_CHECK(std::isfinite(v) && v >= 0.0f, "{}: scale '{}' holds {}, scales must be finite and >= 0", file, name, v);
  return out;
}

std::vector<std::string> Fp8Checkpoint::dequantize(const TensorRef& w, const std::vector<uint8_t>& q,
                                                   const WeightSlice& slice, std::vector<float>& out) const {
  const std::string file = w.file->path().string();
  GS_CHECK(quant_.fp8 && !quant_.online,
           "{}: tensor '{}' is F8_E4M3 but config.json has no quantization_config saying how it is scaled", file,
           w.name);
  GS_CHECK(w.shape.size() == 2 && ends_with(w.name, "weight"),
           "{}: F8_E4M3 tensor '{}' {} is not a projection weight (only Linear weights may be FP8)", file, w.name,
           shape_str(w.shape));
  const std::string stem = w.name.substr(0, w.name.size() - 6);
  std::vector<std::string> used{stem + quant_.scale_suffix};
  int64_t rows = 0, cols = 0;
  const std::vector<float> s = scales_of(w, used[0], rows, cols);
  if (quant_.static_activations) {  // checked and claimed; activations are not quantized in f32
    const std::string in = stem + "input_scale";
    const TensorRef* t = ckpt_.find(in);
    GS_CHECK(t && numel(t->shape) == 1, "{}: static activations need a one-element '{}' beside '{}' ({})", file, in,
             w.name, t ? shape_str(t->shape) : std::string("missing"));
    used.push_back(in);
  } else if (ckpt_.find(stem + "input_scale")) {
    used.push_back(stem + "input_scale");
  }
  const int64_t K = w.shape[1];
  out.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    const int64_t fi = slice.full_index(w.shape, int64_t(i)), n = fi / K, k = fi % K;
    const float sc = quant_.scales == Fp8WeightScales::Tensor    ? s[0]
                     : quant_.scales == Fp8WeightScales::Channel ? s[size_t(n)]
                                                                 : s[size_t((n / 128) * cols + k / 128)];
    out[i] = f8e4m3_to_f32(q[i]) * sc;
  }
  return used;
}

}  // namespace gs
