// Batched LoRA kernels. shrink: one block per (token, rank row), a dot product over K split over
// its threads. expand: one thread per (token, 16 bytes of output columns), a sum over the rank of
// coalesced B^T rows. 16-byte loads wherever rows are 16-byte aligned (the real models' shapes).
// Rows of the base model (slot < 0) and padding return at once, so a batch pays for its
// adapter tokens only.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/lora_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kShrinkThreads = 128;
constexpr int kExpandThreads = 128;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// One block per (token, rank row): its threads split K (16-byte loads when VEC), then reduce.
template <typename T, bool VEC>
__global__ void __launch_bounds__(kShrinkThreads)
    lora_shrink_kernel(const T* x, const T* a, const int32_t* slots, float* tmp, int K, int R, int S) {
  const int t = blockIdx.x, r = blockIdx.y;
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;  // uniform over the block
  const T* xr = x + int64_t(t) * K;
  const T* ar = a + (int64_t(slot) * R + r) * K;
  float acc = 0.0f;
  if constexpr (VEC) {
    constexpr int E = kVecElems<T>;
    for (int k = threadIdx.x * E; k < K; k += kShrinkThreads * E) {
      float xf[E], af[E];
      unpack_vec<T>(*reinterpret_cast<const uint4*>(xr + k), xf);
      unpack_vec<T>(*reinterpret_cast<const uint4*>(ar + k), af);
#pragma unroll
      for (int i = 0; i < E; ++i) acc += xf[i] * af[i];
    }
  } else {
    for (int k = threadIdx.x; k < K; k += kShrinkThreads) acc += to_f(xr[k]) * to_f(ar[k]);
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) tmp[int64_t(t) * R + r] = acc;
}

// One thread per (token, E consecutive output columns): a sum over the rank of coalesced B^T rows.
template <typename T, bool VEC>
__global__ void __launch_bounds__(kExpandThreads)
    lora_expand_kernel(const float* tmp, const T* bt, const int32_t* slots, T* y, int R, int N, int S) {
  constexpr int E = VEC ? kVecElems<T> : 1;
  const int t = blockIdx.x;
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;
  const int n0 = (blockIdx.y * kExpandThreads + threadIdx.x) * E;
  if (n0 >= N) return;
  const float* tr = tmp + int64_t(t) * R;
  const T* b = bt + int64_t(slot) * R * N + n0;
  float acc[E] = {};
#pragma unroll 4
  for (int r = 0; r < R; ++r) {
    const float c = tr[r];
    if constexpr (VEC) {
      float bf[E];
      unpack_vec<T>(*reinterpret_cast<const uint4*>(b + int64_t(r) * N), bf);
#pragma unroll
      for (int i = 0; i < E; ++i) acc[i] += c * bf[i];
    } else {
      acc[0] += c * to_f(b[int64_t(r) * N]);
    }
  }
  T* yp = y + int64_t(t) * N + n0;
  if constexpr (VEC) {
    float yf[E];
    unpack_vec<T>(*reinterpret_cast<const uint4*>(yp), yf);
    alignas(16) T out[E];
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = from_f<T>(yf[i] + acc[i]);
    *reinterpret_cast<uint4*>(yp) = *reinterpret_cast<const uint4*>(out);
  } else {
    *yp = from_f<T>(to_f(*yp) + acc[0]);
  }
}

}  // namespace

template <typename T>
cudaError_t lora_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                        cudaStream_t s) {
  if (T_ == 0 || R == 0) return cudaSuccess;
  const dim3 grid{unsigned(T_), unsigned(R)};
  if (K % kVecElems<T> == 0 && aligned16(x) && aligned16(a))
    lora_shrink_kernel<T, true><<<grid, kShrinkThreads, 0, s>>>(x, a, slots, tmp, K, R, S);
  else
    lora_shrink_kernel<T, false><<<grid, kShrinkThreads, 0, s>>>(x, a, slots, tmp, K, R, S);
  return cudaGetLastError();
}

template <typename T>
cudaError_t lora_expand(const float* tmp, const T* bt, const int32_t* slots, T* y, int T_, int R, int N, int S,
                        cudaStream_t s) {
  if (T_ == 0 || N == 0) return cudaSuccess;
  if (N % kVecElems<T> == 0 && aligned16(bt) && aligned16(y)) {
    const int cols = N / kVecElems<T>;
    const dim3 grid(unsigned(T_), unsigned((cols + kExpandThreads - 1) / kExpandThreads));
    lora_expand_kernel<T, true><<<grid, kExpandThreads, 0, s>>>(tmp, bt, slots, y, R, N, S);
  } else {
    const dim3 grid(unsigned(T_), unsigned((N + kExpandThreads - 1) / kExpandThreads));
    lora_expand_kernel<T, false><<<grid, kExpandThreads, 0, s>>>(tmp, bt, slots, y, R, N, S);
  }
  return cudaGetLastError();
}

#define GS_INSTANTIATE_LORA(T)                                                                                       \
  template cudaError_t lora_shrink<T>(const T*, const T*, const int32_t*, float*, int, int, int, int, cudaStream_t); \
  template cudaError_t lora_expand<T>(const float*, const T*, const int32_t*, T*, int, int, int, int, cudaStream_t);
GS_INSTANTIATE_LORA(bf16_t)
GS_INSTANTIATE_LORA(float)
#undef GS_INSTANTIATE_LORA

}  // namespace gs::cuda
