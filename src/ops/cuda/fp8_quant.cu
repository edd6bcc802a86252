// FP8 weight quantization at load and dequantization to bf16 (ops/cuda/fp8_kernels.h).
#include <cuda_fp8.h>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/fp8_kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBlockK = 128;

// One thread block per (row group, column group): the group's largest magnitude.
__global__ void group_amax_kernel(const float* __restrict__ src, int r, int K, int group_rows, int gk, int G,
                                  float* __restrict__ amax) {
  const int gr = blockIdx.x / G, gc = blockIdx.x % G;
  const int r0 = gr * group_rows, r1 = min(r, r0 + group_rows);
  const int c0 = gc * gk, c1 = min(K, c0 + gk), width = c1 - c0;
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < int64_t(r1 - r0) * width; i += blockDim.x)
    m = fmaxf(m, fabsf(src[int64_t(r0 + i / width) * K + c0 + i % width]));
  m = block_max(m);
  if (threadIdx.x == 0) amax[blockIdx.x] = m;
}

// One thread block per row.
__global__ void quantize_kernel(const float* __restrict__ src, int K, int group_rows, int gk, int G,
                                const float* __restrict__ amax, uint8_t* __restrict__ q, float* __restrict__ scales) {
  const int row = blockIdx.x;
  const float* a = amax + int64_t(row / group_rows) * G;
  for (int c = threadIdx.x; c < K; c += blockDim.x) {
    const float v = src[int64_t(row) * K + c] / e4m3_row_scale(a[c / gk]);
    q[int64_t(row) * K + c] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
  }
  for (int g = threadIdx.x; g < G; g += blockDim.x) scales[int64_t(row) * G + g] = e4m3_row_scale(a[g]);
}

__global__ void dequantize_kernel(const uint8_t* __restrict__ q, const float* __restrict__ scales, int G,
                                  uint16_t* __restrict__ out, int K) {
  const int row = blockIdx.x;
  for (int c = threadIdx.x; c < K; c += blockDim.x) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(q[int64_t(row) * K + c], __NV_E4M3);
    const float s = scales[int64_t(row) * G + (G == 1 ? 0 : c / kBlockK)];
    out[int64_t(row) * K + c] = f2bf(__half2float(__half(h)) * s);
  }
}

// Chunks of 8 a thread holds in registers in quantize_rows_vec_kernel (K up to 8 kThreads of them).
constexpr int kRowChunks = 8;

// One thread block per token, its row read once with 16-byte loads into registers: the amax, then
// e4m3 of x / scale stored 8 bytes at a time. Launched with PDL (x is the previous kernel's).
__global__ void __launch_bounds__(kThreads)
    quantize_rows_vec_kernel(const uint16_t* __restrict__ x, int K, uint8_t* __restrict__ q,
                             float* __restrict__ scales) {
  const int row = blockIdx.x, KV = K / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x + int64_t(row) * K);
  pdl_wait();
  uint4 v[kRowChunks];
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int c = int(threadIdx.x) + i * kThreads;
    if (c >= KV) break;
    v[i] = xr[c];
  }
  pdl_trigger();
  store_e4m3_row(v, K, q + int64_t(row) * K, scales + row);
}

// One thread block per token: its row of x (bf16) to e4m3 with scale amax / 448 (any K).
__global__ void quantize_rows_kernel(const uint16_t* __restrict__ x, int K, uint8_t* __restrict__ q,
                                     float* __restrict__ scales) {
  const int row = blockIdx.x;
  const uint16_t* xr = x + int64_t(row) * K;
  float m = 0.0f;
  for (int c = threadIdx.x; c < K; c += blockDim.x) m = fmaxf(m, fabsf(bf2f(xr[c])));
  const float scale = e4m3_row_scale(block_max(m)), inv = 1.0f / scale;
  if (threadIdx.x == 0) scales[row] = scale;
  for (int c = threadIdx.x; c < K; c += blockDim.x)
    q[int64_t(row) * K + c] = __nv_cvt_float_to_fp8(bf2f(xr[c]) * inv, __NV_SATFINITE, __NV_E4M3);
}

// One warp per (token, 128-column group), 4 columns a lane: the group's amax, then e4m3 of x / scale.
__global__ void quantize_groups_kernel(const uint16_t* __restrict__ x, int M, int K, uint8_t* __restrict__ q,
                                       float* __restrict__ scales) {
  const int G = K / kBlockK, lane = int(threadIdx.x & 31);
  const int64_t item = int64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  pdl_wait();
  pdl_trigger();
  if (item >= int64_t(M) * G) return;
  const int m = int(item / G), g = int(item % G);
  const int64_t at = int64_t(m) * K + g * kBlockK + lane * 4;
  const uint2 v = *reinterpret_cast<const uint2*>(x + at);
  const float f[4] = {__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u), __uint_as_float(v.y << 16),
                      __uint_as_float(v.y & 0xffff0000u)};
  float a = fmaxf(fmaxf(fabsf(f[0]), fabsf(f[1])), fmaxf(fabsf(f[2]), fabsf(f[3])));
  for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  const float scale = e4m3_row_scale(a), inv = 1.0f / scale;
  if (lane == 0) scales[int64_t(g) * M + m] = scale;
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    packed |= uint32_t(__nv_cvt_float_to_fp8(f[i] * inv, __NV_SATFINITE, __NV_E4M3)) << (8 * i);
  *reinterpret_cast<uint32_t*>(q + at) = packed;
}

__global__ void block_grid_kernel(const float* __restrict__ row_scales, int N, int G, float* __restrict__ grid) {
  const int NB = (N + kBlockK - 1) / kBlockK;
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  pdl_wait();
  pdl_trigger();
  if (i < NB * G) grid[i] = row_scales[int64_t(i / G) * kBlockK * G + i % G];
}

}  // namespace

cudaError_t fp8_quantize_rows(const uint16_t* x, int M, int K, uint8_t* q, float* scales, cudaStream_t s) {
  if (M == 0) return cudaGetLastError();
  if (K % 8 == 0 && K <= 8 * kThreads * kRowChunks && vec_aligned(x, q))
    return launch_pdl(quantize_rows_vec_kernel, M, kThreads, 0, s, x, K, q, scales);
  quantize_rows_kernel<<<M, kThreads, 0, s>>>(x, K, q, scales);
  return cudaGetLastError();
}

cudaError_t fp8_quantize_groups(const uint16_t* x, int M, int K, uint8_t* q, float* scales, cudaStream_t s) {
  if (K % kBlockK != 0 || !vec_aligned(x, q)) return cudaErrorInvalidValue;
  const int64_t items = int64_t(M) * (K / kBlockK);
  if (items == 0) return cudaGetLastError();
  constexpr int kPerBlock = kThreads / 32;
  return launch_pdl(quantize_groups_kernel, unsigned((items + kPerBlock - 1) / kPerBlock), kThreads, 0, s, x, M, K, q,
                    scales);
}

cudaError_t fp8_block_grid(const float* row_scales, int N, int G, float* grid, cudaStream_t s) {
  const int n = (N + kBlockK - 1) / kBlockK * G;
  if (n == 0) return cudaGetLastError();
  return launch_pdl(block_grid_kernel, (n + kThreads - 1) / kThreads, kThreads, 0, s, row_scales, N, G, grid);
}

cudaError_t fp8_quantize(const float* src, int r, int K, int group_rows, bool block128, float* amax, uint8_t* q,
                         float* scales, cudaStream_t s) {
  if (r == 0) return cudaGetLastError();
  const int gk = block128 ? kBlockK : K, G = (K + gk - 1) / gk, RG = (r + group_rows - 1) / group_rows;
  group_amax_kernel<<<RG * G, kThreads, 0, s>>>(src, r, K, group_rows, gk, G, amax);
  quantize_kernel<<<r, kThreads, 0, s>>>(src, K, group_rows, gk, G, amax, q, scales);
  return cudaGetLastError();
}

cudaError_t fp8_dequantize(const uint8_t* q, const float* scales, int G, uint16_t* out, int N, int K, cudaStream_t s) {
  if (N > 0) dequantize_kernel<<<N, kThreads, 0, s>>>(q, scales, G, out, K);
  return cudaGetLastError();
}

}  // namespace gs::cuda
