// RMSNorm kernels: one block per row (fp32 sums), and one warp per head for head_rms_norm.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kNormThreads = 256;

// When `residual` is set: residual += x first (stored in R: f32 for an fp32 residual stream, or
// rounded to T), then the norm of the new residual. out may alias x: x is fully read before the
// barrier. x is X (T, or f32 when it is the residual itself).
template <typename T, typename X, typename R>
__global__ void rms_norm_kernel(R* residual, const X* x, const T* w, float eps, T* out, int H) {
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const X* xr = x + row * H;
  R* rr = residual ? residual + row * H : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_f(xr[i]);
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
    const float v = rr ? to_f(rr[i]) : to_f(xr[i]);
    o[i] = from_f<T>(v * inv * to_f(w[i]));
  }
}

template <typename T>
__global__ void head_rms_norm_kernel(T* x, const T* w, float eps, int n_rows, int D) {
  const int warp = int(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5));
  const int lane = threadIdx.x & 31;
  if (warp >= n_rows) return;
  T* h = x + int64_t(warp) * D;
  float ss = 0.0f;
  for (int i = lane; i < D; i += 32) {
    const float v = to_f(h[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(warp_sum(ss) / float(D) + eps);
  for (int i = lane; i < D; i += 32) h[i] = from_f<T>(to_f(h[i]) * inv * to_f(w[i]));
}

}  // namespace

template <typename T, typename X>
cudaError_t rms_norm(const X* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_pdl(rms_norm_kernel<T, X, float>, T_, kNormThreads, 0, s, static_cast<float*>(nullptr), x, w, eps, out,
                    H);
}

template <typename T, typename R>
cudaError_t add_rms_norm(R* residual, const T* x, const T* w, float eps, T* out, int T_, int H, cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_pdl(rms_norm_kernel<T, T, R>, T_, kNormThreads, 0, s, residual, x, w, eps, out, H);
}

template <typename T>
cudaError_t head_rms_norm(T* x, const T* w, float eps, int T_, int n_heads, int D, cudaStream_t s) {
  const int rows = T_ * n_heads;
  constexpr int kWarps = 8;
  if (rows > 0) head_rms_norm_kernel<T><<<(rows + kWarps - 1) / kWarps, kWarps * 32, 0, s>>>(x, w, eps, rows, D);
  return cudaGetLastError();
}

#define GS_INSTANTIATE(T, R)                                                                  \
  template cudaError_t rms_norm<T, R>(const R*, const T*, float, T*, int, int, cudaStream_t); \
  template cudaError_t add_rms_norm<T, R>(R*, const T*, const T*, float, T*, int, int, cudaStream_t);
GS_INSTANTIATE(bf16_t, bf16_t)
GS_INSTANTIATE(bf16_t, float)
GS_INSTANTIATE(float, float)
#undef GS_INSTANTIATE
template cudaError_t head_rms_norm<bf16_t>(bf16_t*, const bf16_t*, float, int, int, int, cudaStream_t);
template cudaError_t head_rms_norm<float>(float*, const float*, float, int, int, int, cudaStream_t);

}  // namespace gs::cuda
