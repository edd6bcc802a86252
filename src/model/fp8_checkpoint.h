// FP8 tensors of a safetensors checkpoint: an F8_E4M3 projection weight and the scales stored
// beside it (model/quant_config.h says which), checked and dequantized exactly (q * scale in
// f32, as torch computes it), so every backend starts from the values the checkpoint means.
#pragma once
#include <string>
#include <vector>

#include "model/quant_config.h"
#include "model/safetensors.h"
#include "model/weight_source.h"

namespace gs {

class Fp8Checkpoint {
 public:
  Fp8Checkpoint(const SafetensorsCheckpoint& ckpt, const QuantConfig& quant) : ckpt_(ckpt), quant_(quant) {}

  // The weight `w` (F8E4M3, its raw bytes of `slice` in `q`, slice's elements in order) as f32
  // into `out`; returns the names of the scale tensors it used. Throws gs::Error naming the tensor
  // when the checkpoint is not FP8, or a scale is missing or of the wrong shape or dtype.
  std::vector<std::string> dequantize(const TensorRef& w, const std::vector<uint8_t>& q, const WeightSlice& slice,
                                      std::vector<float>& out) const;

  // Tensors an FP8 checkpoint may hold beside what the model loads (KV-cache scales).
  static bool known_extra(const std::string& name);

 private:
  std::vector<float> scales_of(const TensorRef& w, const std::string& name, int64_t& rows, int64_t& cols) const;

  const SafetensorsCheckpoint& ckpt_;
  QuantConfig quant_;
};

}  // namespace gs
