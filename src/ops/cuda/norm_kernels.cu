// RMSNorm kernels: one block per row (fp32 sums).
// Rows of a multiple of 8 elements (aligned) take the vector path: 16-byte loads, each thread's
// 8-element chunks kept in registers between the sum and the scaling (one pass over memory).
#include <algorithm>

#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kNormThreads = 256;

// When `residual` is set: residual += x first (stored in R: f32 for an fp32 residual stream, or
// rounded to T), then the norm of the new residual. out may alias x: x is fully read before the
// barrier. x is X (T, or f32 when it is the residual itself); SC: read through the FP8 GEMM's
// scales (OutputScales).
template <typename T, typename X, typename R, bool SC = false>
__global__ void rms_norm_kernel(R* residual, const X* x, const T* w, float eps, T* out, int H, OutputScales sc) {
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const X* xr = x + row * H;
  R* rr = residual ? residual + row * H : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    float v = scaled<SC>(to_f(xr[i]), sc, row, i);
    if (rr) {
      const R r = from_f<R>(to_f(rr[i]) + v);
      rr[i] = r;
      v = to_f(r);
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / float(H) + eps);
  T* o = out + row * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    const float v = rr ? to_f(rr[i]) : scaled<SC>(to_f(xr[i]), sc, row, i);
    o[i] = from_f<T>(v * inv * to_f(w[i]));
  }
}

constexpr int kMaxChunks = 4;  // 8-element chunks per thread: H <= 8 * 4 * 1024

// Up to 1024 threads a block (64 registers a thread at most). qo.q set: out's FP8 copy too.
template <typename T, typename X, typename R, bool SC = false>
__global__ void __launch_bounds__(1024) rms_norm_vec_kernel(R* residual, const X* x, const T* w, float eps, T* out,
                                                            int H, OutputScales sc, QuantizedOut qo) {
  // The weight's first chunk (constant data) is loaded before pdl_wait(): it overlaps the previous
  // kernel's tail (a decode step's norm is one block, a chunk a thread, whose dependent loads are
  // its whole cost). One chunk only: all of them would not fit 1024 threads' registers.
  constexpr int WV = 8 / kVecElems<T>;
  uint4 w0[WV];
  const bool w_early = threadIdx.x * 8 < H;
  if (w_early) {
#pragma unroll
    for (int i = 0; i < WV; ++i) w0[i] = reinterpret_cast<const uint4*>(w + threadIdx.x * 8)[i];
  }
  pdl_wait();
  pdl_trigger();
  const int64_t base = int64_t(blockIdx.x) * H;
  float v[kMaxChunks][8];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    const int e = (threadIdx.x + j * blockDim.x) * 8;
    if (e >= H) break;
    load8(x + base + e, v[j]);
    scaled8<SC>(v[j], sc, blockIdx.x, e);
    if (residual) {
      float r[8];
      load8(residual + base + e, r);
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] = v[j][i] = to_f(from_f<R>(r[i] + v[j][i]));
      store8(residual + base + e, r);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[j][i] * v[j][i];
  }
  rms_norm_store(v, ss, H, eps, int(blockDim.x), out + base, [&](int j, int e, float* wf) {
    if (j == 0) {
#pragma unroll
      for (int i = 0; i < WV; ++i) unpack_vec<T>(w0[i], wf + i * kVecElems<T>);
    } else {
      load8(w + e, wf);
    }
  });
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (!qo.q) return;
    uint4 p[kMaxChunks];  // out's chunks as stored
#pragma unroll
    for (int j = 0; j < kMaxChunks; ++j)
      if ((threadIdx.x + j * blockDim.x) * 8 < H) p[j] = pack_vec<T>(v[j]);
    store_e4m3_row(p, H, qo.q + base, qo.scales + blockIdx.x);
  }
}

// One row per block; the vector kernel when H % 8 == 0, H fits kMaxChunks chunks per thread and
// every row is 16-byte aligned.
// qo.q set (T bf16): out's FP8 copy by the vector kernel, else by fp8_quantize_rows after the other.
template <typename T, typename X, typename R, bool SC = false>
cudaError_t launch_norm(R* residual, const X* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s,
                        OutputScales sc = {}, QuantizedOut qo = {}) {
  const int chunks = H / 8;
  const int threads = std::min(1024, (chunks + 31) / 32 * 32);
  if (H % 8 == 0 && chunks <= kMaxChunks * threads && vec_aligned(x, w, out, sc.col, sc.bias) &&
      (!residual || vec_aligned(residual)) && (!qo.q || (std::is_same_v<T, bf16_t> && vec_aligned(qo.q))))
    return launch_pdl(rms_norm_vec_kernel<T, X, R, SC>, T_, threads, 0, s, residual, x, w, eps, out, H, sc, qo);
  return quantize_out_after(
      launch_pdl(rms_norm_kernel<T, X, R, SC>, T_, kNormThreads, 0, s, residual, x, w, eps, out, H, sc), out, T_, H, qo,
      s);
}

}  // namespace

template <typename T, typename X>
cudaError_t rms_norm(const X* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_norm<T, X, float>(nullptr, x, w, eps, out, T_, H, s);
}

template <typename T, typename R>
cudaError_t add_rms_norm(R* residual, const T* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s,
                         OutputScales sc, QuantizedOut qo) {
  if (T_ <= 0) return cudaGetLastError();
  return sc.row ? launch_norm<T, T, R, true>(residual, x, w, eps, out, T_, H, s, sc, qo)
                : launch_norm<T, T, R>(residual, x, w, eps, out, T_, H, s, {}, qo);
}

#define GS_INSTANTIATE(T, R)                                                                                       \
  template cudaError_t rms_norm<T, R>(const R*, const T*, float, T*, int, int, cudaStream_t);                      \
  template cudaError_t add_rms_norm<T, R>(R*, const T*, const T*, float, T*, int, int, cudaStream_t, OutputScales, \
                                          QuantizedOut);
GS_INSTANTIATE(bf16_t, bf16_t)
GS_INSTANTIATE(bf16_t, float)
GS_INSTANTIATE(float, float)
#undef GS_INSTANTIATE

}  // namespace gs::cuda
