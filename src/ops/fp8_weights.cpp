// Implements ops/fp8_weights.h: FP8 weight quantization on the host.
#include "ops/fp8_weights.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace gs {

void fp8_quantize_host(const float* src, int64_t r, int64_t K, int64_t group_rows, bool block128, uint8_t* q,
                       float* scales, float* deq) {
  GS_CHECK(r >= 0 && K > 0 && group_rows > 0, "fp8 quantization of [{}, {}] in groups of {} rows", r, K, group_rows);
  const int64_t gk = block128 ? kFp8BlockK : K, G = (K + gk - 1) / gk;
  std::vector<float> scale(static_cast<size_t>(G));
  for (int64_t r0 = 0; r0 < r; r0 += group_rows) {
    const int64_t r1 = std::min(r, r0 + group_rows);
    for (int64_t g = 0; g < G; ++g) {
      float amax = 0.0f;
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t k = g * gk; k < std::min(K, (g + 1) * gk); ++k) amax = std::max(amax, std::fabs(src[i * K + k]));
      scale[size_t(g)] = fp8_scale_of(amax);
    }
    for (int64_t i = r0; i < r1; ++i) {
      for (int64_t k = 0; k < K; ++k) {
        const float s = scale[size_t(k / gk)];
        const uint8_t v = f32_to_f8e4m3(src[i * K + k] / s);
        if (q) q[i * K + k] = v;
        if (deq) deq[i * K + k] = f8e4m3_to_f32(v) * s;
      }
      if (scales) std::copy(scale.begin(), scale.end(), scales + i * G);
    }
  }
}

}  // namespace gs
