// Rotary embedding kernels: in-place RoPE of q and k, and the fused QKV epilogue (split of the
// fused projection, Qwen3's per-head q/k RMSNorm, RoPE) in one pass. Angles are fp32
// position * inv_freq with accurate sincosf (as HF computes them), never the fast intrinsics.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxPairsPerLane = 4;  // D <= 256

int blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 * 32 ? b : 65535 * 32);
}

// One thread per rotary pair (i, i + D/2) of one head of one token.
template <typename T>
__global__ void rope_kernel(T* q, T* k, const int32_t* positions, const float* inv_freq, int T_, int hq, int hkv, int D,
                            int long_from) {
  const int half = D / 2;
  const int64_t per_token = int64_t(hq + hkv) * half;
  const int64_t total = per_token * T_;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / per_token;
    const int r = int(e % per_token);
    const int head = r / half, i = r % half;
    T* base = head < hq ? q + (t * hq + head) * D : k + (t * hkv + (head - hq)) * D;
    float sn, cs;
    const int pos = positions[t];
    sincosf(float(pos) * inv_freq[(long_from > 0 && pos >= long_from ? half : 0) + i], &sn, &cs);
    const float x1 = to_f(base[i]), x2 = to_f(base[i + half]);
    base[i] = from_f<T>(x1 * cs - x2 * sn);
    base[i + half] = from_f<T>(x2 * cs + x1 * sn);
  }
}

// One warp per (token, head) of the hq + 2 hkv heads of the fused row; lane c holds the pairs
// (i, i + D/2) for i = c, c + 32, ... in registers, so the norm and the rotation need no
// intermediate store.
template <typename T>
__global__ void split_qkv_rope_kernel(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                                      const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D,
                                      int long_from) {
  pdl_wait();
  pdl_trigger();
  const int heads = hq + 2 * hkv;
  const int64_t item = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (item >= int64_t(T_) * heads) return;
  const int64_t t = item / heads;
  const int h = int(item % heads);
  const T* src = qkv + item * D;  // rows are heads * D wide, heads in q, k, v order
  const int half = D / 2;
  if (h >= hq + hkv) {  // v: plain copy
    T* dst = v + (t * hkv + (h - hq - hkv)) * D;
    for (int i = lane; i < D; i += 32) dst[i] = src[i];
    return;
  }
  const bool is_q = h < hq;
  T* dst = is_q ? q + (t * hq + h) * D : k + (t * hkv + (h - hq)) * D;
  const T* nw = is_q ? q_norm : k_norm;
  float a[kMaxPairsPerLane], b[kMaxPairsPerLane];
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kMaxPairsPerLane; ++u) {
    const int i = lane + 32 * u;
    a[u] = i < half ? to_f(src[i]) : 0.0f;
    b[u] = i < half ? to_f(src[i + half]) : 0.0f;
    ss += a[u] * a[u] + b[u] * b[u];
  }
  float inv = 1.0f;
  if (nw) inv = rsqrtf(warp_sum(ss) / float(D) + eps);
  const float pos = float(positions[t]);
  const float* table = inv_freq + (long_from > 0 && positions[t] >= long_from ? half : 0);
#pragma unroll
  for (int u = 0; u < kMaxPairsPerLane; ++u) {
    const int i = lane + 32 * u;
    if (i >= half) break;
    float x1 = a[u], x2 = b[u];
    if (nw) {
      x1 *= inv * to_f(nw[i]);
      x2 *= inv * to_f(nw[i + half]);
    }
    float sn, cs;
    sincosf(pos * table[i], &sn, &cs);
    dst[i] = from_f<T>(x1 * cs - x2 * sn);
    dst[i + half] = from_f<T>(x2 * cs + x1 * sn);
  }
}

}  // namespace

template <typename T>
cudaError_t rope(T* q, T* k, const int32_t* positions, const float* inv_freq, int T_, int hq, int hkv, int D,
                 int long_from, cudaStream_t s) {
  const int64_t n = int64_t(T_) * (hq + hkv) * (D / 2);
  if (n > 0) rope_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(q, k, positions, inv_freq, T_, hq, hkv, D, long_from);
  return cudaGetLastError();
}

template <typename T>
cudaError_t split_qkv_rope(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                           const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D, int long_from,
                           cudaStream_t s) {
  if (D > 64 * kMaxPairsPerLane || D % 2 != 0) return cudaErrorInvalidValue;
  const int64_t warps = int64_t(T_) * (hq + 2 * hkv);
  constexpr int kWarps = kThreads / 32;
  if (warps <= 0) return cudaGetLastError();
  return launch_pdl(split_qkv_rope_kernel<T>, unsigned((warps + kWarps - 1) / kWarps), kThreads, 0, s, qkv, positions,
                    inv_freq, q_norm, k_norm, eps, q, k, v, T_, hq, hkv, D, long_from);
}

#define GS_INSTANTIATE(T)                                                                                           \
  template cudaError_t rope<T>(T*, T*, const int32_t*, const float*, int, int, int, int, int, cudaStream_t);        \
  template cudaError_t split_qkv_rope<T>(const T*, const int32_t*, const float*, const T*, const T*, float, T*, T*, \
                                         T*, int, int, int, int, int, cudaStream_t);
GS_INSTANTIATE(bf16_t)
GS_INSTANTIATE(float)
#undef GS_INSTANTIATE

}  // namespace gs::cuda
