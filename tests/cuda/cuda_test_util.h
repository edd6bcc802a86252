// Helpers of the GPU tests: skip without a GPU, bf16-exact random data, host read-back, errors.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "bench/cuda/bench_tensors.h"
#include "core/cuda/cuda_device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/backend.h"

#define GS_REQUIRE_GPU() \
  if (::gs::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

namespace gs::test {

// Random normal values already rounded to bf16, so the CPU and GPU start from equal inputs; host
// values as a device tensor of a dtype (`on`, `on_i32`).
using bench::on;
using bench::on_i32;
using bench::randn;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Device (or host) tensor -> host f32 values, after the backend's stream has drained.
inline std::vector<float> read(Backend& b, const Tensor& t) {
  CpuAllocator host;
  Tensor h = Tensor::empty(t.shape(), t.dtype(), host);
  b.copy(h, t);
  b.stream().synchronize();
  std::vector<float> out(size_t(t.numel()));
  if (t.dtype() == DType::I32) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(h.data_as<int32_t>()[i]);
  } else {
    convert_host(h.data(), t.dtype(), out.data(), DType::F32, out.size());
  }
  return out;
}

// ||a - b|| / ||b||; NaN anywhere gives infinity.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += double(a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * double(b[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace gs::test
