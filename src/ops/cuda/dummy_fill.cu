// Dummy weights on the device (Backend::fill_dummy, ops/dummy_fill.h): the same function of the
// element index as the host computes, written in place, so that a dummy model of 100 GB loads
// at memory speed instead of the host's.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"

namespace gs::cuda {

namespace {

template <typename T>
__global__ void fill_dummy_kernel(T* out, int64_t n, DummyFill f) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(f(i));
}

template <typename T>
cudaError_t launch(void* out, int64_t n, const DummyFill& f, cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  fill_dummy_kernel<T><<<int(blocks < 32768 ? blocks : 32768), kThreads, 0, s>>>(static_cast<T*>(out), n, f);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_dummy(void* out, DType dt, int64_t n, const DummyFill& f, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  switch (dt) {
    case DType::F32: return launch<float>(out, n, f, s);
    case DType::BF16: return launch<bf16_t>(out, n, f, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gs::cuda
