// Batched LoRA kernels. shrink: one warp per (token, rank row), a dot product over K. expand: one
// thread per (token, output column), a sum over the rank with coalesced reads of B^T rows.
// Rows of the base model (slot < 0) and padding return at once, so a batch pays for its
// adapter tokens only.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/lora_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kShrinkWarps = 8;
constexpr int kExpandThreads = 256;

template <typename T>
__global__ void lora_shrink_kernel(const T* x, const T* a, const int32_t* slots, float* tmp, int K, int R, int S) {
  const int t = blockIdx.x;
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;
  const int r = blockIdx.y * kShrinkWarps + int(threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (r >= R) return;
  const T* xr = x + int64_t(t) * K;
  const T* ar = a + (int64_t(slot) * R + r) * K;
  float acc = 0.0f;
  for (int k = lane; k < K; k += 32) acc += to_f(xr[k]) * to_f(ar[k]);
  acc = warp_sum(acc);
  if (lane == 0) tmp[int64_t(t) * R + r] = acc;
}

template <typename T>
__global__ void lora_expand_kernel(const float* tmp, const T* bt, const int32_t* slots, T* y, int R, int N, int S) {
  const int t = blockIdx.x;
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;
  const int n = blockIdx.y * kExpandThreads + threadIdx.x;
  if (n >= N) return;
  const float* tr = tmp + int64_t(t) * R;
  const T* b = bt + int64_t(slot) * R * N + n;
  float acc = 0.0f;
  for (int r = 0; r < R; ++r) acc += tr[r] * to_f(b[int64_t(r) * N]);
  T* yp = y + int64_t(t) * N + n;
  *yp = from_f<T>(to_f(*yp) + acc);
}

}  // namespace

template <typename T>
cudaError_t lora_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                        cudaStream_t s) {
  if (T_ == 0 || R == 0) return cudaSuccess;
  const dim3 grid(unsigned(T_), unsigned((R + kShrinkWarps - 1) / kShrinkWarps));
  lora_shrink_kernel<T><<<grid, kShrinkWarps * 32, 0, s>>>(x, a, slots, tmp, K, R, S);
  return cudaGetLastError();
}

template <typename T>
cudaError_t lora_expand(const float* tmp, const T* bt, const int32_t* slots, T* y, int T_, int R, int N, int S,
                        cudaStream_t s) {
  if (T_ == 0 || N == 0) return cudaSuccess;
  const dim3 grid(unsigned(T_), unsigned((N + kExpandThreads - 1) / kExpandThreads));
  lora_expand_kernel<T><<<grid, kExpandThreads, 0, s>>>(tmp, bt, slots, y, R, N, S);
  return cudaGetLastError();
}

#define GS_INSTANTIATE_LORA(T)                                                                                    \
  template cudaError_t lora_shrink<T>(const T*, const T*, const int32_t*, float*, int, int, int, int, cudaStream_t); \
  template cudaError_t lora_expand<T>(const float*, const T*, const int32_t*, T*, int, int, int, int, cudaStream_t);
GS_INSTANTIATE_LORA(bf16_t)
GS_INSTANTIATE_LORA(float)
#undef GS_INSTANTIATE_LORA

}  // namespace gs::cuda
