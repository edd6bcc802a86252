// Element-wise kernels of the Gemma family: in-place scaling and logit soft-capping (Gemma's
// sqrt(hidden) embedding scale, final logit cap). GeGLU is ops' gated activation.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 65535 * 32 ? b : 65535 * 32);
}

template <typename T>
__global__ void scale_softcap_kernel(T* x, int64_t n, float alpha, float cap) {
  pdl_wait();
  pdl_trigger();
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const float v = to_f(x[e]);
    x[e] = from_f<T>(cap > 0.0f ? cap * tanhf(v / cap) : v * alpha);
  }
}

}  // namespace

template <typename T>
cudaError_t scale_softcap(T* x, int64_t n, float alpha, float cap, cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(scale_softcap_kernel<T>, blocks_for(n), kThreads, 0, s, x, n, alpha, cap);
}

template cudaError_t scale_softcap<bf16_t>(bf16_t*, int64_t, float, float, cudaStream_t);
template cudaError_t scale_softcap<float>(float*, int64_t, float, float, cudaStream_t);

}  // namespace gs::cuda
