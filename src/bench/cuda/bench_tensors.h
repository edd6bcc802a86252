// Device inputs of the per-op GPU timings (`graphserve bench ops`) and the GPU tests: random normal
// values already rounded to bf16 (so a CPU reference and the GPU start from equal inputs), and host
// vectors uploaded to the device.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/backend.h"

namespace gs::bench {

// Normal values already rounded to bf16.
inline std::vector<float> randn(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(rng)));
  return v;
}

// f32 host values as a device tensor of dtype `dt`.
inline Tensor on(Backend& b, const std::vector<float>& v, const Shape& s, DType dt) {
  return b.upload(v.data(), DType::F32, s, dt);
}
inline Tensor on_i32(Backend& b, const std::vector<int32_t>& v, const Shape& s) {
  return b.upload(v.data(), DType::I32, s, DType::I32);
}

}  // namespace gs::bench
