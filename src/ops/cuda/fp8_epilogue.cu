// Implements cuda::fp8_scale_output (ops/cuda/fp8_kernels.h): one pass over y, 8 bf16 a thread
// where rows are 16-byte aligned (N a multiple of 8; launched with PDL), else one element a thread.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/fp8_kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {
constexpr int kThreads = 256;

// Grid (ceil(N / 8 / kThreads), M): thread t of row m scales y[m, 8t .. 8t + 8).
__global__ void scale_output_vec8_kernel(uint16_t* __restrict__ y, OutputScales sc, int N) {
  const int m = blockIdx.y, n = (blockIdx.x * kThreads + threadIdx.x) * 8;
  pdl_wait();
  pdl_trigger();
  if (n >= N) return;
  uint16_t* p = y + int64_t(m) * N + n;
  float f[8];
  load8(p, f);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = scaled<true>(f[i], sc, m, n + i);
  store8(p, f);
}

__global__ void scale_output_kernel(uint16_t* __restrict__ y, OutputScales sc, int N) {
  const int m = blockIdx.y, n = blockIdx.x * kThreads + threadIdx.x;
  if (n >= N) return;
  uint16_t* p = y + int64_t(m) * N + n;
  *p = f2bf(scaled<true>(bf2f(*p), sc, m, n));
}
}  // namespace

cudaError_t fp8_scale_output(uint16_t* y, const float* x_scales, const float* w_scales, const uint16_t* bias, int M,
                             int N, cudaStream_t s) {
  if (M == 0 || N == 0) return cudaGetLastError();
  const bool vec = N % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const int per_block = vec ? kThreads * 8 : kThreads;
  const dim3 grid((N + per_block - 1) / per_block, M);
  const OutputScales sc{x_scales, w_scales, bias};
  if (vec) return launch_pdl(scale_output_vec8_kernel, grid, kThreads, 0, s, y, sc, N);
  scale_output_kernel<<<grid, kThreads, 0, s>>>(y, sc, N);
  return cudaGetLastError();
}

}  // namespace gs::cuda
