// Bandwidth-bound bf16 GEMV for small M (decode): one warp per output column n streams the
// weight row w[n, :] once with 16-byte loads (4 in flight per lane) and reuses it for all M
// rows of x, which stay in L1/L2. cuBLAS is launch/ramp bound at M = 1 (SPEC §11).
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"

namespace gs::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kUnroll = 4;

template <int M>
__device__ __forceinline__ void fma_chunk(const uint4& wv, const uint16_t* x, int64_t K, int k8,
                                          float (&acc)[M]) {
  float wf[8];
  unpack8(wv, wf);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[8];
    unpack8(__ldg(reinterpret_cast<const uint4*>(x + m * K) + k8), xf);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m] = fmaf(wf[j], xf[j], acc[m]);
  }
}

template <int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                const uint16_t* __restrict__ bias, void* __restrict__ y, bool y_f32, int N, int K) {
  const int n = int(blockIdx.x) * kWarpsPerBlock + int(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  const uint4* wrow = reinterpret_cast<const uint4*>(w + int64_t(n) * K);
  const int K8 = K / 8;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;

  int k8 = lane;
  for (; k8 + 32 * (kUnroll - 1) < K8; k8 += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wrow + k8 + 32 * u);  // streamed, used once
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk<M>(wv[u], x, K, k8 + 32 * u, acc);
  }
  for (; k8 < K8; k8 += 32) fma_chunk<M>(__ldcs(wrow + k8), x, K, k8, acc);

#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v = warp_sum(acc[m]);
    if (lane == m) {
      if (bias) v += bf2f(bias[n]);
      if (y_f32)
        static_cast<float*>(y)[int64_t(m) * N + n] = v;
      else
        static_cast<uint16_t*>(y)[int64_t(m) * N + n] = f2bf(v);
    }
  }
}

template <int M>
void launch(const bf16_t* x, const bf16_t* w, const bf16_t* bias, void* y, bool y_f32, int N, int K,
            cudaStream_t s) {
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  gemv_kernel<M><<<blocks, kWarpsPerBlock * 32, 0, s>>>(x, w, bias, y, y_f32, N, K);
}

}  // namespace

bool gemv_supported(int M, int K, const void* x, const void* w) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return M >= 1 && M <= kGemvMaxM && K % 8 == 0 && aligned(x) && aligned(w);
}

cudaError_t gemv(const bf16_t* x, const bf16_t* w, const bf16_t* bias, void* y, bool y_f32, int M,
                 int N, int K, cudaStream_t s) {
  if (N <= 0) return cudaGetLastError();
  switch (M) {
    case 1: launch<1>(x, w, bias, y, y_f32, N, K, s); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace gs::cuda
