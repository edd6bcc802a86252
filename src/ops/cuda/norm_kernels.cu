// RMSNorm kernels: one block per row (fp32 sums), and one warp per head for head_rms_norm.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"

namespace gs::cuda {

namespace {

constexpr int kNormThreads = 256;

// When `residual` is set: residual += x first (stored rounded to bf16, as the model keeps it),
// then the norm of the new residual. out may alias x: x is fully read before the barrier.
__global__ void rms_norm_kernel(uint16_t* residual, const uint16_t* x, const uint16_t* w, float eps,
                                uint16_t* out, int H) {
  const int64_t row = blockIdx.x;
  const uint16_t* xr = x + row * H;
  uint16_t* rr = residual ? residual + row * H : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    float v = bf2f(xr[i]);
    if (rr) {
      const uint16_t r = f2bf(bf2f(rr[i]) + v);
      rr[i] = r;
      v = bf2f(r);
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / float(H) + eps);
  const uint16_t* src = rr ? rr : xr;
  uint16_t* o = out + row * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) o[i] = f2bf(bf2f(src[i]) * inv * bf2f(w[i]));
}

__global__ void head_rms_norm_kernel(uint16_t* x, const uint16_t* w, float eps, int n_rows, int D) {
  const int warp = int(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5));
  const int lane = threadIdx.x & 31;
  if (warp >= n_rows) return;
  uint16_t* h = x + int64_t(warp) * D;
  float ss = 0.0f;
  for (int i = lane; i < D; i += 32) {
    const float v = bf2f(h[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(warp_sum(ss) / float(D) + eps);
  for (int i = lane; i < D; i += 32) h[i] = f2bf(bf2f(h[i]) * inv * bf2f(w[i]));
}

}  // namespace

cudaError_t rms_norm(const bf16_t* x, const bf16_t* w, float eps, bf16_t* out, int T, int H,
                     cudaStream_t s) {
  if (T > 0) rms_norm_kernel<<<T, kNormThreads, 0, s>>>(nullptr, x, w, eps, out, H);
  return cudaGetLastError();
}

cudaError_t add_rms_norm(bf16_t* residual, const bf16_t* x, const bf16_t* w, float eps, bf16_t* out,
                         int T, int H, cudaStream_t s) {
  if (T > 0) rms_norm_kernel<<<T, kNormThreads, 0, s>>>(residual, x, w, eps, out, H);
  return cudaGetLastError();
}

cudaError_t head_rms_norm(bf16_t* x, const bf16_t* w, float eps, int T, int n_heads, int D,
                          cudaStream_t s) {
  const int rows = T * n_heads;
  constexpr int kWarps = 8;
  if (rows > 0) head_rms_norm_kernel<<<(rows + kWarps - 1) / kWarps, kWarps * 32, 0, s>>>(x, w, eps, rows, D);
  return cudaGetLastError();
}

}  // namespace gs::cuda
