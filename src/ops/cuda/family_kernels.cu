// Element-wise kernels of the Gemma family: GeGLU (gelu tanh times up), and in-place scaling
// and logit soft-capping (Gemma's sqrt(hidden) embedding scale, final logit cap).
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
__global__ void gelu_tanh_mul_kernel(const T* gate_up, T* out, int64_t T_, int I) {
  pdl_wait();
  pdl_trigger();
  const int64_t total = T_ * I;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / I;
    const int i = int(e % I);
    const float g = to_f(gate_up[t * 2 * I + i]);
    const float u = to_f(gate_up[t * 2 * I + I + i]);
    const float k = 0.7978845608028654f;  // sqrt(2 / pi), as torch's gelu(approximate='tanh')
    out[e] = from_f<T>(0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * u);
  }
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
cudaError_t gelu_tanh_mul(const T* gate_up, T* out, int T_, int I, cudaStream_t s) {
  const int64_t n = int64_t(T_) * I;
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(gelu_tanh_mul_kernel<T>, blocks_for(n), kThreads, 0, s, gate_up, out, int64_t(T_), I);
}

template <typename T>
cudaError_t scale_softcap(T* x, int64_t n, float alpha, float cap, cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(scale_softcap_kernel<T>, blocks_for(n), kThreads, 0, s, x, n, alpha, cap);
}

template cudaError_t gelu_tanh_mul<bf16_t>(const bf16_t*, bf16_t*, int, int, cudaStream_t);
template cudaError_t gelu_tanh_mul<float>(const float*, float*, int, int, cudaStream_t);
template cudaError_t scale_softcap<bf16_t>(bf16_t*, int64_t, float, float, cudaStream_t);
template cudaError_t scale_softcap<float>(float*, int64_t, float, float, cudaStream_t);

}  // namespace gs::cuda
