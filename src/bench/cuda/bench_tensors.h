// Device inputs of the per-op GPU timings (`graphserve bench ops`) and the GPU tests: random normal
// values already rounded to bf16 (so a CPU reference and the GPU start from equal inputs), and host
// vectors uploaded to the device.
#pragma once
#include <algorithm>
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

// A random cache plane [blocks, ...]: bf16, or e4m3 codes of the same values; at most 64 blocks
// of random values, repeated (the timings do not depend on the values).
inline Tensor random_cache_plane(Backend& gpu, const Shape& shape, uint32_t seed, bool fp8) {
  const int64_t blocks = shape[0], per_block = shape[1] * shape[2] * shape[3], chunk = std::min<int64_t>(blocks, 64);
  const std::vector<float> v = randn(size_t(chunk * per_block), seed);
  Tensor host;
  std::vector<uint8_t> codes;
  const Shape chunk_shape{chunk, shape[1], shape[2], shape[3]};
  if (fp8) {
    codes.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) codes[i] = f32_to_f8e4m3(v[i]);
    host = Tensor::wrap(codes.data(), chunk_shape, DType::F8E4M3, Device::cpu());
  }
  const Tensor src = fp8 ? host : on(gpu, v, chunk_shape, DType::BF16);
  Tensor t = Tensor::empty(shape, fp8 ? DType::F8E4M3 : DType::BF16, gpu.allocator());
  for (int64_t b = 0; b < blocks; b += chunk) {
    const int64_t n = std::min(chunk, blocks - b);
    gpu.copy(t.rows(b, n), src.rows(0, n));
  }
  gpu.stream().synchronize();
  return t;
}

}  // namespace gs::bench
