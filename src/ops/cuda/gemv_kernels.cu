// Bandwidth-bound GEMV for small M (decode): one warp per output streams R weight rows once
// with 16-byte loads (4 in flight per lane) and reuses them for all M rows of x, which stay in
// L1/L2. cuBLAS is launch/ramp bound at M = 1 (4-6 us per small GEMM on an H200). An epilogue
// (ops/cuda/linear_epilogues.cuh) decides which rows a warp streams and what it stores, so the
// decode step's neighbours of a projection fold into it. Launched with PDL (ops/cuda/launch.cuh).
#include "core/env.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/linear_epilogues.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kUnroll = 4;

// acc[m] += w chunk . x[m] chunk kv (x through the read-only path).
template <typename T, int M>
__device__ __forceinline__ void fma_chunk(const uint4& wv, const T* x, int64_t K, int kv, float (&acc)[M]) {
  constexpr int V = kVecElems<T>;
  float wf[V];
  unpack_vec<T>(wv, wf);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[V];
    const uint4* xv = reinterpret_cast<const uint4*>(x + m * K) + kv;
    unpack_vec<T>(__ldg(xv), xf);
#pragma unroll
    for (int j = 0; j < V; ++j) acc[m] = fmaf(wf[j], xf[j], acc[m]);
  }
}

// One warp per output n < N (KS > 1: KS warps per output, each over a contiguous 1 / KS of K,
// summed through shared memory in a fixed order): streams the epilogue's R weight rows of n, then
// stores.
template <typename T, int M, typename Epi, int WARPS = kWarpsPerBlock, int KS = 1>
__global__ void __launch_bounds__(WARPS * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, Epi epi, int N, int K) {
  static_assert(KS == 1 || (M == 1 && WARPS % KS == 0), "split K: one token, whole outputs per block");
  constexpr int R = Epi::R;
  const int warp = int(threadIdx.x >> 5), lane = threadIdx.x & 31;
  const int n = int(blockIdx.x) * (WARPS / KS) + warp / KS;
  const uint4* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wrow[r] = reinterpret_cast<const uint4*>(w + epi.row(n < N ? n : 0, r) * K);
  const int KV = K / kVecElems<T>;
  // This warp's chunks [kv0, kv_end) of the row (the whole row when KS = 1).
  const int per = KS == 1 ? KV : (KV + 32 * KS - 1) / (32 * KS) * 32;
  const int kv0 = min(KV, (warp % KS) * per), kv_end = min(KV, kv0 + per);
  int kv = kv0 + lane;
  // The first batch of weight loads (constant data) before pdl_wait(): it overlaps the previous
  // kernel's tail. Then the plain loop (a guarded loop body measured 4-12% slower).
  uint4 wv0[R][kUnroll];
  const bool first = n < N && kv + 32 * (kUnroll - 1) < kv_end;
  if (first) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv0[r][u] = __ldcs(wrow[r] + kv + 32 * u);
  }
  pdl_wait();
  pdl_trigger();
  if (KS == 1 && n >= N) return;  // never warp 0 (a block has at least one output)
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  if (first) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fma_chunk<T, M>(wv0[r][u], x, K, kv + 32 * u, acc[r]);
    kv += 32 * kUnroll;
  }
  if (n >= N) kv = kv_end;  // split K: a block's warps past N only join the barrier below
  for (; kv + 32 * (kUnroll - 1) < kv_end; kv += 32 * kUnroll) {
    uint4 wv[R][kUnroll];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[r][u] = __ldcs(wrow[r] + kv + 32 * u);  // streamed, used once
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fma_chunk<T, M>(wv[r][u], x, K, kv + 32 * u, acc[r]);
  }
  for (; kv < kv_end; kv += 32)
#pragma unroll
    for (int r = 0; r < R; ++r) fma_chunk<T, M>(__ldcs(wrow[r] + kv), x, K, kv, acc[r]);

  if constexpr (KS > 1) {
    __shared__ float part[WARPS][R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(acc[r][0]);
      if (lane == 0) part[warp][r] = v;
    }
    __syncthreads();
    if (warp % KS == 0 && lane == 0 && n < N) {
      float v[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        v[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < KS; ++k) v[r] += part[warp + k][r];
      }
      epi.store(n, 0, v);
    }
  } else {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v[R];
#pragma unroll
      for (int r = 0; r < R; ++r) v[r] = warp_sum(acc[r][m]);
      if (lane == m) epi.store(n, m, v);
    }
  }
}

// Warps per output of a GEMV reading x from global memory: split K when N alone leaves the GPU
// short of warps (< 4096 outputs: the decode step's o_proj, down and qkv at the 1B shape), as far
// as each warp keeps at least one full batch of kUnroll loads (K / 8 >= 32 kUnroll KS).
// GS_GEMV_KSPLIT=0: one warp per output (A/B).
int gemv_k_split(int N, int KV) {
  static const bool on = !env_is("GS_GEMV_KSPLIT", "0");
  if (!on || N >= 4096) return 1;
  for (int ks : {4, 2})
    if (KV >= 32 * kUnroll * ks) return ks;
  return 1;
}

template <typename T, typename Epi, int KS>
cudaError_t launch_split_k(const T* x, const T* w, const Epi& epi, int N, int K, cudaStream_t s) {
  constexpr int per_block = kWarpsPerBlock / KS;
  return launch_pdl(gemv_kernel<T, 1, Epi, kWarpsPerBlock, KS>, (N + per_block - 1) / per_block, kWarpsPerBlock * 32, 0,
                    s, x, w, epi, N, K);
}

template <typename T, typename Epi>
cudaError_t launch_gemv(const T* x, const T* w, const Epi& epi, int N, int K, cudaStream_t s) {
  if (N <= 0) return cudaGetLastError();
  const int ks = gemv_k_split(N, K / kVecElems<T>);
  if (ks == 4) return launch_split_k<T, Epi, 4>(x, w, epi, N, K, s);
  if (ks == 2) return launch_split_k<T, Epi, 2>(x, w, epi, N, K, s);
  return launch_split_k<T, Epi, 1>(x, w, epi, N, K, s);
}

}  // namespace

bool gemv_supported(int M, int K, int elem_bytes, const void* x, const void* w) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return M >= 1 && M <= kGemvMaxM && elem_bytes > 0 && K % (16 / elem_bytes) == 0 && aligned(x) && aligned(w);
}

template <typename T>
cudaError_t gemv(const T* x, const T* w, const T* bias, void* y, bool y_f32, int M, int N, int K, cudaStream_t s) {
  if (M != 1) return cudaErrorInvalidValue;
  return launch_gemv(x, w, PlainEpilogue<T>{bias, y, y_f32, N}, N, K, s);
}

template <typename T>
cudaError_t gemv_gated(GatedActivation act, const T* x, const T* w, T* out, int M, int I, int K, cudaStream_t s) {
  if (M != 1) return cudaErrorInvalidValue;
  if (act == GatedActivation::GeluTanh)
    return launch_gemv(x, w, GatedEpilogue<T, GatedActivation::GeluTanh>{out, I, false}, I, K, s);
  return launch_gemv(x, w, GatedEpilogue<T, GatedActivation::Silu>{out, I, false}, I, K, s);
}

template <typename T>
cudaError_t gemv_qkv_rope(const T* x, const T* w, const T* bias, const int32_t* positions, const float* inv_freq, T* q,
                          T* k, T* v, int M, int hq, int hkv, int D, int K, int long_from, cudaStream_t s) {
  if (M != 1 || D % 2 != 0) return cudaErrorInvalidValue;
  const int half = D / 2;
  return launch_gemv(x, w, QkvRopeEpilogue<T>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from, false},
                     (hq + 2 * hkv) * half, K, s);
}

#define GS_INSTANTIATE(T)                                                                                            \
  template cudaError_t gemv<T>(const T*, const T*, const T*, void*, bool, int, int, int, cudaStream_t);              \
  template cudaError_t gemv_gated<T>(GatedActivation, const T*, const T*, T*, int, int, int, cudaStream_t);          \
  template cudaError_t gemv_qkv_rope<T>(const T*, const T*, const T*, const int32_t*, const float*, T*, T*, T*, int, \
                                        int, int, int, int, int, cudaStream_t);
GS_INSTANTIATE(bf16_t)
GS_INSTANTIATE(float)
#undef GS_INSTANTIATE

}  // namespace gs::cuda
