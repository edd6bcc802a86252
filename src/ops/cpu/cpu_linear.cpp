// linear on the CPU: y = x w^T, tiled so a tile of w stays in cache while blocks of tokens
// stream past it; each output is a dot product along the contiguous K axis (vectorised).
#include <algorithm>

#include "ops/cpu/cpu_kernels.h"

namespace gs::cpu {

namespace {
constexpr int64_t kTokBlock = 4;  // tokens sharing one pass over a row of w
constexpr int64_t kRowTile = 32;  // rows of w per tile (32 x 4K floats = 512 KiB at K=4096)

// Dot products of one row of w with four rows of x.
inline void dot4(const float* x0, const float* x1, const float* x2, const float* x3, const float* w, int64_t K,
                 float out[4]) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (int64_t k = 0; k < K; ++k) {
    const float wk = w[k];
    a0 += x0[k] * wk;
    a1 += x1[k] * wk;
    a2 += x2[k] * wk;
    a3 += x3[k] * wk;
  }
  out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
}

// Dot products of two rows of w with four rows of x: 6 loads feed 8 multiply-adds.
inline void dot4x2(const float* x0, const float* x1, const float* x2, const float* x3, const float* w0, const float* w1,
                   int64_t K, float out[8]) {
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
  for (int64_t k = 0; k < K; ++k) {
    const float u = w0[k], v = w1[k];
    a0 += x0[k] * u, a1 += x1[k] * u, a2 += x2[k] * u, a3 += x3[k] * u;
    b0 += x0[k] * v, b1 += x1[k] * v, b2 += x2[k] * v, b3 += x3[k] * v;
  }
  out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3, out[4] = b0, out[5] = b1, out[6] = b2, out[7] = b3;
}

inline float dot1(const float* x, const float* w, int64_t K) {
  float a = 0;
#pragma omp simd reduction(+ : a)
  for (int64_t k = 0; k < K; ++k) a += x[k] * w[k];
  return a;
}

// Built twice: for AVX2+FMA machines (x86-64-v3) and the portable baseline, picked at load time.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void tile(const float* x, const float* w, const float* b, float* y, int64_t T, int64_t N, int64_t K,
          int64_t n0, int64_t n1) {
  int64_t t0 = 0;
  for (; t0 + kTokBlock <= T; t0 += kTokBlock) {
    const float* xs = x + t0 * K;
    int64_t n = n0;
    for (; n + 2 <= n1; n += 2) {
      float s[8];
      dot4x2(xs, xs + K, xs + 2 * K, xs + 3 * K, w + n * K, w + (n + 1) * K, K, s);
      const float b0 = b ? b[n] : 0.0f, b1 = b ? b[n + 1] : 0.0f;
      for (int64_t i = 0; i < kTokBlock; ++i) y[(t0 + i) * N + n] = s[i] + b0, y[(t0 + i) * N + n + 1] = s[4 + i] + b1;
    }
    for (; n < n1; ++n) {
      float s[4];
      dot4(xs, xs + K, xs + 2 * K, xs + 3 * K, w + n * K, K, s);
      const float bias = b ? b[n] : 0.0f;
      for (int64_t i = 0; i < kTokBlock; ++i) y[(t0 + i) * N + n] = s[i] + bias;
    }
  }
  for (; t0 < T; ++t0)
    for (int64_t n = n0; n < n1; ++n) y[t0 * N + n] = dot1(x + t0 * K, w + n * K, K) + (b ? b[n] : 0.0f);
}
}  // namespace

void linear(const float* x, const float* w, const float* b, float* y, int64_t T, int64_t N, int64_t K) {
  const int64_t tiles = (N + kRowTile - 1) / kRowTile;
#pragma omp parallel for schedule(static) if (T * N * K > (1 << 22))
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t n0 = i * kRowTile;
    tile(x, w, b, y, T, N, K, n0, std::min(N, n0 + kRowTile));
  }
}

}  // namespace gs::cpu
