// Device helpers shared by the CUDA kernels: element load/store for the two compute dtypes
// (bf16 stored as uint16_t, f32), 16-byte vector unpacking, warp and block reductions.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/kernels.h"

namespace gs::cuda {

__device__ __forceinline__ float bf2f(uint16_t v) { return __uint_as_float(uint32_t(v) << 16); }
__device__ __forceinline__ uint16_t f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

// Element type T of a compute dtype: uint16_t (bf16) or float. Math is always in fp32.
__device__ __forceinline__ float to_f(uint16_t v) { return bf2f(v); }
__device__ __forceinline__ float to_f(float v) { return v; }
template <typename T>
__device__ __forceinline__ T from_f(float f);
template <>
__device__ __forceinline__ uint16_t from_f<uint16_t>(float f) {
  return f2bf(f);
}
template <>
__device__ __forceinline__ float from_f<float>(float f) {
  return f;
}

// Elements of T in one 16-byte vector.
template <typename T>
constexpr int kVecElems = 16 / int(sizeof(T));

// Unpacks 8 bf16 packed in a 16-byte vector.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
// Unpacks the kVecElems<T> elements of a 16-byte vector to fp32.
template <typename T>
__device__ __forceinline__ void unpack_vec(const uint4& v, float* f) {
  if constexpr (sizeof(T) == 2) {
    unpack8(v, f);
  } else {
    f[0] = __uint_as_float(v.x), f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z), f[3] = __uint_as_float(v.w);
  }
}

// Packs kVecElems<T> fp32 values into a 16-byte vector of T (bf16 rounded to nearest even).
template <typename T>
__device__ __forceinline__ uint4 pack_vec(const float* f) {
  if constexpr (sizeof(T) == 2) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = uint32_t(f2bf(f[2 * i])) | (uint32_t(f2bf(f[2 * i + 1])) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
  }
}

// 8 consecutive elements of T (one 16-byte vector of bf16, two of f32) to / from fp32; p is
// 16-byte aligned.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* f) {
  const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < 8 / kVecElems<T>; ++i) unpack_vec<T>(v[i], f + i * kVecElems<T>);
}
template <typename T>
__device__ __forceinline__ void store8(T* p, const float* f) {
  uint4* v = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int i = 0; i < 8 / kVecElems<T>; ++i) v[i] = pack_vec<T>(f + i * kVecElems<T>);
}

// OutputScales (kernels.h) on element (t, n) of an unscaled product, or v itself when !SC.
template <bool SC>
__device__ __forceinline__ float scaled(float v, const OutputScales& sc, int64_t t, int n) {
  if constexpr (!SC) return v;
  const float r = v * (sc.row[t] * sc.col[n]);
  return sc.bias ? r + bf2f(sc.bias[n]) : r;
}
// ... on elements (t, n .. n + 8) in place (n a multiple of 8: col and bias read as vectors).
template <bool SC>
__device__ __forceinline__ void scaled8(float* f, const OutputScales& sc, int64_t t, int n) {
  if constexpr (SC) {
    const float r = sc.row[t];
    const float4 c0 = *reinterpret_cast<const float4*>(sc.col + n),
                 c1 = *reinterpret_cast<const float4*>(sc.col + n + 4);
    const float c[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    float b[8] = {};
    if (sc.bias) load8(sc.bias + n, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = f[i] * (r * c[i]) + b[i];
  }
}

// Rotary embedding (rotate-half form) of 8 pairs: the elements c .. c+8 of a head's first half (a)
// and second half (b), by the position's (cos, sin) pairs cs[c ..], into the stored dst[c ..] and
// dst[half + c ..].
template <typename T>
__device__ __forceinline__ void store_rotated8(T* dst, int c, int half, const float* a, const float* b,
                                               const float2* cs) {
  float ra[8], rb[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 r = cs[c + j];
    ra[j] = a[j] * r.x - b[j] * r.y;
    rb[j] = b[j] * r.x + a[j] * r.y;
  }
  store8(dst + c, ra);
  store8(dst + half + c, rb);
}

// Whether every pointer is 16-byte aligned (the vector paths' precondition).
template <typename... P>
__host__ __device__ inline bool vec_aligned(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// A warp reduction (warp_sum, warp_max) over the block (blockDim.x a multiple of 32, <= 1024);
// every thread gets the result. The second step's lanes past the block's warps hold 0: the sum's
// identity, and the max's over non-negative values.
template <float (&WarpOp)(float)>
__device__ __forceinline__ float block_reduce(float v) {
  __shared__ float part[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpOp(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float x = lane < int(blockDim.x >> 5) ? part[lane] : 0.0f;
    x = WarpOp(x);
    if (lane == 0) total = x;
  }
  __syncthreads();
  return total;
}
__device__ __forceinline__ float block_sum(float v) { return block_reduce<warp_sum>(v); }
// The largest of non-negative values (magnitudes).
__device__ __forceinline__ float block_max(float v) { return block_reduce<warp_max>(v); }

// The RMSNorm tail of one row held in registers the way the vectorised norm kernels hold it: this
// thread's chunk c (8 elements at element (threadIdx.x + c * stride) * 8) in v[c], ss its share of
// the sum of squares. Stores out[e ..] = v * rsqrt(mean square + eps) * w, chunk c of w from
// weight(c, e, wf). One order of operations for every fused add + norm, so each matches the plain
// add_rms_norm bit for bit.
template <int C, typename T, typename Weight>
__device__ __forceinline__ void rms_norm_store(float (&v)[C][8], float ss, int H, float eps, int stride, T* out,
                                               const Weight& weight) {
  const float inv = rsqrtf(block_sum(ss) / float(H) + eps);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * stride) * 8;
    if (e >= H) break;
    float wf[8];
    weight(c, e, wf);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[c][i] *= inv * wf[i];
    store8(out + e, v[c]);
  }
}

}  // namespace gs::cuda
