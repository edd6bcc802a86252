// Implements cuda::fp8_scale_output (ops/cuda/fp8_kernels.h): one pass over y, 8 bf16 a thread
// where rows are 16-byte aligned (N a multiple of 8; launched with PDL), else one element a thread.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/fp8_kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {
constexpr int kThreads = 256;

__device__ __forceinline__ float scaled(float v, float sx, const float* ws, const uint16_t* bias, int n) {
  const float r = v * (sx * ws[n]);
  return bias ? r + bf2f(bias[n]) : r;
}

// Grid (ceil(N / 8 / kThreads), M): thread t of row m scales y[m, 8t .. 8t + 8).
__global__ void scale_output_vec8_kernel(uint16_t* __restrict__ y, const float* __restrict__ xs,
                                         const float* __restrict__ ws, const uint16_t* __restrict__ bias, int N) {
  const int m = blockIdx.y, n = (blockIdx.x * kThreads + threadIdx.x) * 8;
  pdl_wait();
  pdl_trigger();
  if (n >= N) return;
  uint16_t* p = y + int64_t(m) * N + n;
  const float sx = xs[m];
  float f[8];
  load8(p, f);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = scaled(f[i], sx, ws, bias, n + i);
  store8(p, f);
}

__global__ void scale_output_kernel(uint16_t* __restrict__ y, const float* __restrict__ xs,
                                    const float* __restrict__ ws, const uint16_t* __restrict__ bias, int N) {
  const int m = blockIdx.y, n = blockIdx.x * kThreads + threadIdx.x;
  if (n >= N) return;
  uint16_t* p = y + int64_t(m) * N + n;
  *p = f2bf(scaled(bf2f(*p), xs[m], ws, bias, n));
}
}  // namespace

cudaError_t fp8_scale_output(uint16_t* y, const float* x_scales, const float* w_scales, const uint16_t* bias, int M,
                             int N, cudaStream_t s) {
  if (M == 0 || N == 0) return cudaGetLastError();
  const bool vec = N % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const int per_block = vec ? kThreads * 8 : kThreads;
  const dim3 grid((N + per_block - 1) / per_block, M);
  if (vec) return launch_pdl(scale_output_vec8_kernel, grid, kThreads, 0, s, y, x_scales, w_scales, bias, N);
  scale_output_kernel<<<grid, kThreads, 0, s>>>(y, x_scales, w_scales, bias, N);
  return cudaGetLastError();
}

}  // namespace gs::cuda
