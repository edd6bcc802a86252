// Implements model/mxfp4.h.
#include "model/mxfp4.h"

#include <cmath>

namespace gs {

float e2m1_value(uint8_t code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kMagnitude[code & 7];
  return code & 8 ? -v : v;
}

void dequantize_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t groups, float* out) {
#pragma omp parallel for if (rows * groups > 4096)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int exp = int(scales[r * groups + g]) - 127;
      const uint8_t* b = blocks + (r * groups + g) * 16;
      float* o = out + (r * groups + g) * 32;
      for (int i = 0; i < 16; ++i) {
        o[2 * i] = std::ldexp(e2m1_value(b[i] & 0x0F), exp);
        o[2 * i + 1] = std::ldexp(e2m1_value(b[i] >> 4), exp);
      }
    }
  }
}

}  // namespace gs
