// Bandwidth-bound GEMV for small M (decode): one warp per output column n streams the weight
// row w[n, :] once with 16-byte loads (4 in flight per lane) and reuses it for all M rows of
// x, which stay in L1/L2. cuBLAS is launch/ramp bound at M = 1 (4-6 us per small GEMM on an H200). Launched with PDL
// (ops/cuda/launch.cuh).
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kUnroll = 4;

template <typename T, int M>
__device__ __forceinline__ void fma_chunk(const uint4& wv, const T* x, int64_t K, int kv, float (&acc)[M]) {
  constexpr int V = kVecElems<T>;
  float wf[V];
  unpack_vec<T>(wv, wf);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[V];
    unpack_vec<T>(__ldg(reinterpret_cast<const uint4*>(x + m * K) + kv), xf);
#pragma unroll
    for (int j = 0; j < V; ++j) acc[m] = fmaf(wf[j], xf[j], acc[m]);
  }
}

template <typename T, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, void* __restrict__ y,
                bool y_f32, int N, int K) {
  const int n = int(blockIdx.x) * kWarpsPerBlock + int(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const uint4* wrow = reinterpret_cast<const uint4*>(w + int64_t(n < N ? n : 0) * K);
  const int KV = K / kVecElems<T>;
  int kv = lane;
  // The first batch of weight loads (constant data) before pdl_wait(): it overlaps the previous
  // kernel's tail. Then the plain loop (a guarded loop body measured 4-12% slower).
  uint4 wv0[kUnroll];
  const bool first = n < N && kv + 32 * (kUnroll - 1) < KV;
  if (first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv0[u] = __ldcs(wrow + kv + 32 * u);
  }
  pdl_wait();
  pdl_trigger();
  if (n >= N) return;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  if (first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk<T, M>(wv0[u], x, K, kv + 32 * u, acc);
    kv += 32 * kUnroll;
  }
  for (; kv + 32 * (kUnroll - 1) < KV; kv += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wrow + kv + 32 * u);  // streamed, used once
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk<T, M>(wv[u], x, K, kv + 32 * u, acc);
  }
  for (; kv < KV; kv += 32) fma_chunk<T, M>(__ldcs(wrow + kv), x, K, kv, acc);

#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v = warp_sum(acc[m]);
    if (lane == m) {
      if (bias) v += to_f(bias[n]);
      if (y_f32)
        static_cast<float*>(y)[int64_t(m) * N + n] = v;
      else
        static_cast<T*>(y)[int64_t(m) * N + n] = from_f<T>(v);
    }
  }
}

}  // namespace

bool gemv_supported(int M, int K, int elem_bytes, const void* x, const void* w) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return M >= 1 && M <= kGemvMaxM && elem_bytes > 0 && K % (16 / elem_bytes) == 0 && aligned(x) && aligned(w);
}

template <typename T>
cudaError_t gemv(const T* x, const T* w, const T* bias, void* y, bool y_f32, int M, int N, int K, cudaStream_t s) {
  if (N <= 0) return cudaGetLastError();
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  switch (M) {
    case 1: return launch_pdl(gemv_kernel<T, 1>, blocks, kWarpsPerBlock * 32, 0, s, x, w, bias, y, y_f32, N, K);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t gemv<bf16_t>(const bf16_t*, const bf16_t*, const bf16_t*, void*, bool, int, int, int,
                                  cudaStream_t);
template cudaError_t gemv<float>(const float*, const float*, const float*, void*, bool, int, int, int, cudaStream_t);

}  // namespace gs::cuda
