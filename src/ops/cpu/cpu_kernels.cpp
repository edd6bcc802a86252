// Implements ops/cpu/cpu_kernels.h.
#include "ops/cpu/cpu_kernels.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace gs::cpu {

namespace {
// Parallelise over rows only when the work pays for waking the thread team.
constexpr int64_t kParallelElems = 1 << 15;

float inv_rms(const float* x, int64_t H, float eps) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < H; ++i) ss += x[i] * x[i];
  return 1.0f / std::sqrt(ss / float(H) + eps);
}
}  // namespace

void embedding(const int32_t* ids, const float* table, float* out, int64_t T, int64_t V, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids[t];
    GS_CHECK(id >= 0 && id < V, "embedding: token id {} at row {} is outside the vocabulary [0, {})", id, t, V);
    std::memcpy(out + t * H, table + int64_t(id) * H, size_t(H) * sizeof(float));
  }
}

void rms_norm(const float* x, const float* w, float eps, float* out, int64_t T, int64_t H) {
#pragma omp parallel for if (T * H > kParallelElems)
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * H;
    float* o = out + t * H;
    const float r = inv_rms(xr, H, eps);
    for (int64_t i = 0; i < H; ++i) o[i] = w[i] * (xr[i] * r);
  }
}

void add_rms_norm(float* residual, const float* x, const float* w, float eps, float* out, int64_t T, int64_t H) {
#pragma omp parallel for if (T * H > kParallelElems)
  for (int64_t t = 0; t < T; ++t) {
    float* res = residual + t * H;
    const float* xr = x + t * H;
    for (int64_t i = 0; i < H; ++i) res[i] += xr[i];
    const float r = inv_rms(res, H, eps);
    float* o = out + t * H;
    for (int64_t i = 0; i < H; ++i) o[i] = w[i] * (res[i] * r);
  }
}

void head_rms_norm(float* x, const float* w, float eps, int64_t T, int64_t row, int64_t D) {
  const int64_t heads = T * (row / D);
#pragma omp parallel for if (T * row > kParallelElems)
  for (int64_t h = 0; h < heads; ++h) {
    float* p = x + h * D;
    const float r = inv_rms(p, D, eps);
    for (int64_t i = 0; i < D; ++i) p[i] = w[i] * (p[i] * r);
  }
}

void rope(float* x, const int32_t* pos, const float* inv_freq, int64_t T, int64_t heads, int64_t D, int long_from) {
  const int64_t half = D / 2;
#pragma omp parallel for if (T * heads * D > kParallelElems)
  for (int64_t t = 0; t < T; ++t) {
    const float p = float(pos[t]);
    const float* table = inv_freq + (long_from > 0 && pos[t] >= long_from ? half : 0);
    for (int64_t j = 0; j < half; ++j) {
      const float f = p * table[j];  // float32 as HF computes it
      const float c = std::cos(f), s = std::sin(f);
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + (t * heads + h) * D;
        const float a = v[j], b = v[j + half];
        v[j] = a * c - b * s;
        v[j + half] = b * c + a * s;
      }
    }
  }
}

namespace {

template <GatedActivation A>
void gated_rows(const float* gate_up, float* out, int64_t T, int64_t I) {
#pragma omp parallel for if (T * I > kParallelElems)
  for (int64_t t = 0; t < T; ++t) {
    const float* g = gate_up + t * 2 * I;
    const float* u = g + I;
    float* o = out + t * I;
    for (int64_t i = 0; i < I; ++i) o[i] = gated_act<A>(g[i], u[i]);
  }
}

}  // namespace

void gated_activation(GatedActivation act, const float* gate_up, float* out, int64_t T, int64_t I) {
  if (act == GatedActivation::GeluTanh)
    gated_rows<GatedActivation::GeluTanh>(gate_up, out, T, I);
  else
    gated_rows<GatedActivation::Silu>(gate_up, out, T, I);
}

void gather_rows(const float* x, const int32_t* idx, float* out, int64_t n, int64_t rows, int64_t H) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = idx[i];
    GS_CHECK(r >= 0 && r < rows, "gather_rows: index {} at {} is outside [0, {})", r, i, rows);
    std::memcpy(out + i * H, x + int64_t(r) * H, size_t(H) * sizeof(float));
  }
}

}  // namespace gs::cpu
