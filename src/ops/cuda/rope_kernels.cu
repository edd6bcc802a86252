// Rotary embedding kernels: in-place RoPE of q and k, and the fused QKV epilogue (split of the
// fused projection, Qwen3's per-head q/k RMSNorm, RoPE) in one pass. Angles are fp32
// position * inv_freq with accurate sincosf (as HF computes them), never the fast intrinsics.
#include <algorithm>
#include <numeric>
#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxPairsPerLane = 4;  // D <= 256

// One warp per (token, head) of the hq + 2 hkv heads of the fused row; lane c holds the pairs
// (i, i + D/2) for i = c, c + 32, ... in registers, so the norm and the rotation need no
// intermediate store. SC: qkv read through the FP8 GEMM's scales (OutputScales).
template <typename T, bool SC>
__global__ void split_qkv_rope_kernel(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                                      const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D,
                                      int long_from, OutputScales sc) {
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
    for (int i = lane; i < D; i += 32) dst[i] = SC ? from_f<T>(scaled<SC>(to_f(src[i]), sc, t, h * D + i)) : src[i];
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
    a[u] = i < half ? scaled<SC>(to_f(src[i]), sc, t, h * D + i) : 0.0f;
    b[u] = i < half ? scaled<SC>(to_f(src[i + half]), sc, t, h * D + i + half) : 0.0f;
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

// The vector path: blockDim (P, tokens per block), P = (hq + 2 hkv) * kTph threads per token.
// Thread x of a token holds the 8 pairs (c + j, c + j + D/2), c = 8 (x % kTph), of head
// x / kTph: two 8-element vectors in, two out. The block first tabulates cos / sin of its
// tokens' D/2 angles in shared memory (each angle once per token, not once per head); q/k norm
// sums over the kTph threads of a head with shuffles (kTph divides 32, so a head's threads are
// in one warp). SC as above.
template <typename T, int kTph, bool SC>
__global__ void split_qkv_rope_vec_kernel(const T* qkv, const int32_t* positions, const float* inv_freq,
                                          const T* q_norm, const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq,
                                          int hkv, int long_from, OutputScales sc) {
  constexpr int half = kTph * 8, D = 2 * half;
  extern __shared__ float cos_sin[];  // [tokens per block][half][2]
  pdl_wait();
  pdl_trigger();
  const int64_t t = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool live = t < T_;
  float2* cs = reinterpret_cast<float2*>(cos_sin) + threadIdx.y * half;
  if (live) {
    const int pos = positions[t];
    const float* table = inv_freq + (long_from > 0 && pos >= long_from ? half : 0);
    for (int i = threadIdx.x; i < half; i += blockDim.x) sincosf(float(pos) * table[i], &cs[i].y, &cs[i].x);
  }
  __syncthreads();
  const int h = threadIdx.x / kTph, c = (threadIdx.x % kTph) * 8;
  const bool is_q = h < hq, is_k = !is_q && h < hq + hkv;
  float a[8] = {}, b[8] = {};
  if (live) {
    const T* src = qkv + (t * (hq + 2 * hkv) + h) * D;
    load8(src + c, a);
    load8(src + half + c, b);
    scaled8<SC>(a, sc, t, h * D + c);
    scaled8<SC>(b, sc, t, h * D + half + c);
  }
  const T* nw = is_q ? q_norm : k_norm;
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) ss += a[j] * a[j] + b[j] * b[j];
#pragma unroll
  for (int o = kTph / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);  // every lane: no divergence
  if (!live) return;
  if (!is_q && !is_k) {
    T* dst = v + (t * hkv + (h - hq - hkv)) * D;
    store8(dst + c, a);
    store8(dst + half + c, b);
    return;
  }
  if (nw) {
    const float inv = rsqrtf(ss / float(D) + eps);
    float wa[8], wb[8];
    load8(nw + c, wa);
    load8(nw + half + c, wb);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] *= inv * wa[j], b[j] *= inv * wb[j];
  }
  store_rotated8(is_q ? q + (t * hq + h) * D : k + (t * hkv + (h - hq)) * D, c, half, a, b, cs);
}

// Launches the vector path when D / 16 threads per head fit it (D in 16, 32, 64, 128, 256),
// the heads of a token fit one block and every row is 16-byte aligned; false otherwise.
template <typename T, int kTph, bool SC>
bool try_split_qkv_rope_vec(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                            const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D, int long_from,
                            cudaStream_t s, OutputScales sc, cudaError_t* err) {
  const int P = (hq + 2 * hkv) * kTph;
  if (D != 16 * kTph || P > 1024 || !vec_aligned(qkv, q, k, v, sc.col, sc.bias) ||
      (q_norm && !vec_aligned(q_norm, k_norm)))
    return false;
  // Tokens per block: about kThreads threads, a whole number of warps (the norm's shuffles).
  const int step = 32 / std::gcd(P, 32);
  const int per_block = std::max(step, kThreads / P / step * step);
  if (P * per_block > 1024) return false;
  const size_t smem = size_t(per_block) * D * sizeof(float);
  *err = launch_pdl(split_qkv_rope_vec_kernel<T, kTph, SC>, unsigned((T_ + per_block - 1) / per_block),
                    dim3(unsigned(P), unsigned(per_block)), smem, s, qkv, positions, inv_freq, q_norm, k_norm, eps, q,
                    k, v, T_, hq, hkv, long_from, sc);
  return true;
}

template <typename T, bool SC>
cudaError_t launch_split_qkv_rope(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                                  const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D,
                                  int long_from, cudaStream_t s, OutputScales sc) {
  const int64_t warps = int64_t(T_) * (hq + 2 * hkv);
  constexpr int kWarps = kThreads / 32;
  cudaError_t err = cudaSuccess;
  auto vec = [&](auto tph) {
    return try_split_qkv_rope_vec<T, decltype(tph)::value, SC>(qkv, positions, inv_freq, q_norm, k_norm, eps, q, k, v,
                                                               T_, hq, hkv, D, long_from, s, sc, &err);
  };
  if (vec(std::integral_constant<int, 4>{}) || vec(std::integral_constant<int, 8>{}) ||
      vec(std::integral_constant<int, 16>{}) || vec(std::integral_constant<int, 2>{}))
    return err;
  return launch_pdl(split_qkv_rope_kernel<T, SC>, unsigned((warps + kWarps - 1) / kWarps), kThreads, 0, s, qkv,
                    positions, inv_freq, q_norm, k_norm, eps, q, k, v, T_, hq, hkv, D, long_from, sc);
}

}  // namespace

template <typename T>
cudaError_t split_qkv_rope(const T* qkv, const int32_t* positions, const float* inv_freq, const T* q_norm,
                           const T* k_norm, float eps, T* q, T* k, T* v, int T_, int hq, int hkv, int D, int long_from,
                           cudaStream_t s, OutputScales sc) {
  if (D > 64 * kMaxPairsPerLane || D % 2 != 0) return cudaErrorInvalidValue;
  if (int64_t(T_) * (hq + 2 * hkv) <= 0) return cudaGetLastError();
  return sc.row ? launch_split_qkv_rope<T, true>(qkv, positions, inv_freq, q_norm, k_norm, eps, q, k, v, T_, hq, hkv, D,
                                                 long_from, s, sc)
                : launch_split_qkv_rope<T, false>(qkv, positions, inv_freq, q_norm, k_norm, eps, q, k, v, T_, hq, hkv,
                                                  D, long_from, s, sc);
}

#define GS_INSTANTIATE(T)                                                                                           \
  template cudaError_t split_qkv_rope<T>(const T*, const int32_t*, const float*, const T*, const T*, float, T*, T*, \
                                         T*, int, int, int, int, int, cudaStream_t, OutputScales);
GS_INSTANTIATE(bf16_t)
GS_INSTANTIATE(float)
#undef GS_INSTANTIATE

}  // namespace gs::cuda
