// e4m3 <-> bf16 / f32 on the device, shared by the FP8 weight kernels (skinny_gemm.cu) and the FP8
// KV cache (attention/cuda).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

#include "ops/cuda/device_util.cuh"

namespace gs::cuda {

// Two e4m3 (the high bytes of v's 16-bit halves) as bf16x2, exactly: sign, exponent and mantissa
// move into bf16's fields with e4m3's exponent bias left in place, which is 2^-120 times the value
// (e4m3 subnormals become bf16 subnormals of the same mantissa), then times 2^120 (bf16 0x7b80),
// exact. Integer ops and one bf16x2 multiply, where the conversion instructions would bound the
// kernel below memory bandwidth.
__device__ __forceinline__ uint32_t e4m3x2_hi_to_bf16x2(uint32_t v) {
  const uint32_t biased = (v & 0x80008000u) | ((v >> 4) & 0x07f007f0u);
  uint32_t out;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out) : "r"(biased), "r"(0x7b807b80u), "r"(0x80008000u));
  return out;
}

// 4 e4m3 (the bytes of q in order) as 2 bf16x2: .x holds bytes 0, 1 and .y bytes 2, 3.
__device__ __forceinline__ uint2 e4m3x4_to_bf16(uint32_t q) {
  return make_uint2(e4m3x2_hi_to_bf16x2(__byte_perm(q, 0u, 0x1404)), e4m3x2_hi_to_bf16x2(__byte_perm(q, 0u, 0x3424)));
}

// 16 e4m3 (bytes in order) as 8 bf16x2, element pairs in order: o[i] holds elements 2i, 2i + 1.
__device__ __forceinline__ void e4m3x16_to_bf16(const uint4& v, uint32_t (&o)[8]) {
  const uint32_t q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint2 b = e4m3x4_to_bf16(q[i]);
    o[2 * i] = b.x, o[2 * i + 1] = b.y;
  }
}

// Two e4m3 (the low 16 bits of v, the first in the low byte) as f16x2, exactly (every e4m3 value is
// an f16 normal or zero), by the hardware conversion: one instruction a pair.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t v) {
  uint32_t d;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(uint16_t(v & 0xffffu)));
  return d;
}

// 16 e4m3 (bytes in order) as 8 f16x2: o[i] holds elements 2i, 2i + 1.
__device__ __forceinline__ void e4m3x16_to_f16(const uint4& v, uint32_t (&o)[8]) {
  const uint32_t q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) o[2 * i] = e4m3x2_to_f16x2(q[i]), o[2 * i + 1] = e4m3x2_to_f16x2(q[i] >> 16);
}

// Two floats as e4m3 (round to nearest even, saturating at +-448; NaN stays NaN), a in the low byte.
__device__ __forceinline__ uint16_t f32x2_to_e4m3x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// 8 bf16 (16 bytes, in order) times inv -> 8 e4m3 (8 bytes, in order).
__device__ __forceinline__ uint2 bf16x8_to_e4m3x8(const uint4& x, float inv) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
  uint16_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    q[i] = f32x2_to_e4m3x2(__uint_as_float(w[i] << 16) * inv, __uint_as_float(w[i] & 0xffff0000u) * inv);
  return make_uint2(uint32_t(q[0]) | uint32_t(q[1]) << 16, uint32_t(q[2]) | uint32_t(q[3]) << 16);
}

// The per-token scale of a row whose largest magnitude is amax: amax / 448 (e4m3's largest
// finite), 1 for a row of zeros.
__device__ __forceinline__ float e4m3_row_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

// One row of bf16 held by the block as the row-wise vector kernels hold it (this thread's chunk c:
// 8 elements at (threadIdx.x + c * blockDim.x) * 8, packed in p[c], chunks past N absent) ->
// e4m3 of row / scale at q_row, scale = e4m3_row_scale(amax) at *scale (thread 0). Every thread
// calls it (block barriers). The same arithmetic as fp8_quantize_rows, so the bits are the same.
template <int C>
__device__ __forceinline__ void store_e4m3_row(const uint4 (&p)[C], int N, uint8_t* q_row, float* scale) {
  float m = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if ((int(threadIdx.x) + c * int(blockDim.x)) * 8 >= N) break;
    float f[8];
    unpack8(p[c], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(f[j]));
  }
  const float s = e4m3_row_scale(block_max(m)), inv = 1.0f / s;
  if (threadIdx.x == 0) *scale = s;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * int(blockDim.x)) * 8;
    if (e >= N) break;
    *reinterpret_cast<uint2*>(q_row + e) = bf16x8_to_e4m3x8(p[c], inv);
  }
}

}  // namespace gs::cuda
