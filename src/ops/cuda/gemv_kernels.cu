// Bandwidth-bound GEMV for small M (decode): one warp per output streams R weight rows once
// with 16-byte loads (4 in flight per lane) and reuses them for all M rows of x, which stay in
// L1/L2. cuBLAS is launch/ramp bound at M = 1 (4-6 us per small GEMM on an H200). An epilogue
// decides which rows a warp streams and what it stores, so the decode step's neighbours of a
// projection fold into it: plain (one row, + bias), gated MLP (the gate and up rows, act(g) * u)
// and the fused QKV epilogue (the rotary pair of rows of a q/k head, RoPE applied, q, k, v
// written split). Launched with PDL (ops/cuda/launch.cuh).
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

// y[m, n] = x[m] . w[n] (+ bias[n]); y is T or f32.
template <typename T>
struct PlainEpilogue {
  static constexpr int R = 1;
  const T* bias;
  void* y;
  bool y_f32;
  int N;
  __device__ int64_t row(int n, int) const { return n; }
  __device__ void store(int n, int m, const float (&v)[R]) const {
    const float o = bias ? v[0] + to_f(bias[n]) : v[0];
    if (y_f32)
      static_cast<float*>(y)[int64_t(m) * N + n] = o;
    else
      static_cast<T*>(y)[int64_t(m) * N + n] = from_f<T>(o);
  }
};

// out[m, n] = act(x[m] . w[n]) * (x[m] . w[N + n]) for w = [gate; up].
template <typename T, GatedActivation A>
struct GatedEpilogue {
  static constexpr int R = 2;
  T* out;
  int N;
  __device__ int64_t row(int n, int r) const { return int64_t(r) * N + n; }
  __device__ void store(int n, int m, const float (&v)[R]) const {
    out[int64_t(m) * N + n] = from_f<T>(gated_act<A>(v[0], v[1]));
  }
};

// Output n = (head h, pair i) of the fused qkv rows (heads in q, k, v order, D = 2 half wide):
// the warp streams rows h D + i and h D + i + half (+ bias), rotates q and k heads by the
// position's angle (M = 1: one token) and stores into q, k or v.
template <typename T>
struct QkvRopeEpilogue {
  static constexpr int R = 2;
  const T* bias;
  const int32_t* positions;
  const float* inv_freq;
  T *q, *k, *v;
  int hq, hkv, half, long_from;
  __device__ int64_t row(int n, int r) const {
    const int h = n / half, i = n % half;
    return int64_t(h) * 2 * half + i + r * half;
  }
  __device__ void store(int n, int, const float (&val)[R]) const {
    const int h = n / half, i = n % half, D = 2 * half;
    float a = val[0], b = val[1];
    if (bias) a += to_f(bias[h * D + i]), b += to_f(bias[h * D + i + half]);
    T* dst;
    if (h >= hq + hkv) {
      dst = v + (h - hq - hkv) * D;
    } else {
      const int pos = positions[0];
      float sn, cs;
      sincosf(float(pos) * inv_freq[(long_from > 0 && pos >= long_from ? half : 0) + i], &sn, &cs);
      const float ra = a * cs - b * sn, rb = b * cs + a * sn;
      a = ra, b = rb;
      dst = h < hq ? q + h * D : k + (h - hq) * D;
    }
    dst[i] = from_f<T>(a);
    dst[i + half] = from_f<T>(b);
  }
};

// One warp per output n < N: streams the epilogue's R weight rows of n, then stores.
template <typename T, int M, typename Epi>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, Epi epi, int N, int K) {
  constexpr int R = Epi::R;
  const int n = int(blockIdx.x) * kWarpsPerBlock + int(threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const uint4* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wrow[r] = reinterpret_cast<const uint4*>(w + epi.row(n < N ? n : 0, r) * K);
  const int KV = K / kVecElems<T>;
  int kv = lane;
  // The first batch of weight loads (constant data) before pdl_wait(): it overlaps the previous
  // kernel's tail. Then the plain loop (a guarded loop body measured 4-12% slower).
  uint4 wv0[R][kUnroll];
  const bool first = n < N && kv + 32 * (kUnroll - 1) < KV;
  if (first) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv0[r][u] = __ldcs(wrow[r] + kv + 32 * u);
  }
  pdl_wait();
  pdl_trigger();
  if (n >= N) return;
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
  for (; kv + 32 * (kUnroll - 1) < KV; kv += 32 * kUnroll) {
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
  for (; kv < KV; kv += 32)
#pragma unroll
    for (int r = 0; r < R; ++r) fma_chunk<T, M>(__ldcs(wrow[r] + kv), x, K, kv, acc[r]);

#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v[R];
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = warp_sum(acc[r][m]);
    if (lane == m) epi.store(n, m, v);
  }
}

template <typename T, typename Epi>
cudaError_t launch_gemv(const T* x, const T* w, const Epi& epi, int N, int K, cudaStream_t s) {
  if (N <= 0) return cudaGetLastError();
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return launch_pdl(gemv_kernel<T, 1, Epi>, blocks, kWarpsPerBlock * 32, 0, s, x, w, epi, N, K);
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
    return launch_gemv(x, w, GatedEpilogue<T, GatedActivation::GeluTanh>{out, I}, I, K, s);
  return launch_gemv(x, w, GatedEpilogue<T, GatedActivation::Silu>{out, I}, I, K, s);
}

template <typename T>
cudaError_t gemv_qkv_rope(const T* x, const T* w, const T* bias, const int32_t* positions, const float* inv_freq, T* q,
                          T* k, T* v, int M, int hq, int hkv, int D, int K, int long_from, cudaStream_t s) {
  if (M != 1 || D % 2 != 0) return cudaErrorInvalidValue;
  const int half = D / 2;
  return launch_gemv(x, w, QkvRopeEpilogue<T>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from},
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
