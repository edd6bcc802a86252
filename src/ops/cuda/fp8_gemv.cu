// The FP8 GEMV of decode (ops/cuda/fp8_kernels.h): one warp per output streams its e4m3 weight
// row once, 16 bytes (16 weights) per lane and load, four loads in flight, and reuses each chunk
// for every token of x (bf16, from L1/L2). Per-row scales multiply the sum once in the epilogue;
// 128-column block scales multiply each chunk's partial sum (a 16-aligned chunk never straddles
// two blocks). Half the bytes of the bf16 GEMV for the same outputs.
#include <cuda_fp8.h>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/fp8_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;
constexpr int kChunk = 16;  // weights per 16-byte load

// 16 e4m3 weights of one 16-byte load to fp32 (exact: e4m3 -> f16 -> f32).
__device__ __forceinline__ void unpack_fp8x16(const uint4& v, float (&f)[kChunk]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i] & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i] >> 16), __NV_E4M3);
    const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
    f[4 * i] = a.x, f[4 * i + 1] = a.y, f[4 * i + 2] = b.x, f[4 * i + 3] = b.y;
  }
}

// acc[m] += (w chunk . x chunk of token m) * sc.
template <int M>
__device__ __forceinline__ void fma_chunk(const uint4& wv, const uint16_t* __restrict__ x, int64_t K, int kv, float sc,
                                          float (&acc)[M]) {
  float wf[kChunk];
  unpack_fp8x16(wv, wf);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const uint4* xp = reinterpret_cast<const uint4*>(x + m * K) + 2 * kv;
    float xf[kChunk];
    unpack8(__ldg(xp), xf);
    unpack8(__ldg(xp + 1), xf + 8);
    float p = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) p = fmaf(wf[j], xf[j], p);
    acc[m] = fmaf(p, sc, acc[m]);
  }
}

template <int M, bool kBlock, bool kF32>
__global__ void __launch_bounds__(kWarps * 32)
    fp8_gemv_kernel(const uint16_t* __restrict__ x, const uint8_t* __restrict__ w, const float* __restrict__ scales,
                    int G, const uint16_t* __restrict__ bias, void* __restrict__ y, int N, int K) {
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int n = int(blockIdx.x) * kWarps + warp;
  if (n >= N) return;
  const uint4* row = reinterpret_cast<const uint4*>(w + int64_t(n) * K);
  const float* srow = scales + int64_t(n) * G;
  const int KV = K / kChunk;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  int kv = lane;
  for (; kv + 32 * (kUnroll - 1) < KV; kv += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldg(row + kv + 32 * u);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = kv + 32 * u;
      fma_chunk<M>(wv[u], x, K, c, kBlock ? __ldg(srow + c * kChunk / 128) : 1.0f, acc);
    }
  }
  for (; kv < KV; kv += 32)
    fma_chunk<M>(__ldg(row + kv), x, K, kv, kBlock ? __ldg(srow + kv * kChunk / 128) : 1.0f, acc);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v = acc[m];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    acc[m] = v;
  }
  if (lane != 0) return;
  const float s = kBlock ? 1.0f : __ldg(srow);
  const float b = bias ? bf2f(bias[n]) : 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = fmaf(acc[m], s, b);
    if constexpr (kF32) {
      static_cast<float*>(y)[int64_t(m) * N + n] = v;
    } else {
      static_cast<uint16_t*>(y)[int64_t(m) * N + n] = f2bf(v);
    }
  }
}

template <int M>
cudaError_t launch(const uint16_t* x, const uint8_t* w, const float* scales, int G, const uint16_t* bias, void* y,
                   bool y_f32, int N, int K, cudaStream_t s) {
  const dim3 grid((N + kWarps - 1) / kWarps), block(kWarps * 32);
  const bool blk = G > 1;
  if (blk && y_f32) fp8_gemv_kernel<M, true, true><<<grid, block, 0, s>>>(x, w, scales, G, bias, y, N, K);
  if (blk && !y_f32) fp8_gemv_kernel<M, true, false><<<grid, block, 0, s>>>(x, w, scales, G, bias, y, N, K);
  if (!blk && y_f32) fp8_gemv_kernel<M, false, true><<<grid, block, 0, s>>>(x, w, scales, G, bias, y, N, K);
  if (!blk && !y_f32) fp8_gemv_kernel<M, false, false><<<grid, block, 0, s>>>(x, w, scales, G, bias, y, N, K);
  return cudaGetLastError();
}

}  // namespace

bool fp8_gemv_supported(int M, int K, const void* x, const void* w) {
  return M >= 1 && M <= kFp8GemvMaxM && K > 0 && K % kChunk == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

cudaError_t fp8_gemv(const uint16_t* x, const uint8_t* w, const float* scales, int G, const uint16_t* bias, void* y,
                     bool y_f32, int M, int N, int K, cudaStream_t s) {
  switch (M) {
    case 1: return launch<1>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 2: return launch<2>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 3: return launch<3>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 4: return launch<4>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 5: return launch<5>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 6: return launch<6>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 7: return launch<7>(x, w, scales, G, bias, y, y_f32, N, K, s);
    case 8: return launch<8>(x, w, scales, G, bias, y, y_f32, N, K, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gs::cuda
