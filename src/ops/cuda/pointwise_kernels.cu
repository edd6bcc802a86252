// Row-wise and element-wise kernels: embedding, rope, silu_mul, gather, argmax, bias, convert.
#include <cfloat>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 * 32 ? b : 65535 * 32);
}

__global__ void embedding_kernel(const int32_t* ids, const uint16_t* table, uint16_t* out, int V,
                                 int H) {
  const int64_t t = blockIdx.x;
  const int id = ids[t];
  uint16_t* o = out + t * H;
  const bool ok = id >= 0 && id < V;
  const uint16_t* row = table + int64_t(ok ? id : 0) * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) o[i] = ok ? row[i] : uint16_t(0);
}

// One thread per rotary pair (i, i + D/2) of one head of one token.
__global__ void rope_kernel(uint16_t* q, uint16_t* k, const int32_t* positions, const float* inv_freq,
                            int T, int hq, int hkv, int D) {
  const int half = D / 2;
  const int64_t per_token = int64_t(hq + hkv) * half;
  const int64_t total = per_token * T;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / per_token;
    const int r = int(e % per_token);
    const int head = r / half, i = r % half;
    uint16_t* base = head < hq ? q + (t * hq + head) * D : k + (t * hkv + (head - hq)) * D;
    float sn, cs;
    sincosf(float(positions[t]) * inv_freq[i], &sn, &cs);
    const float x1 = bf2f(base[i]), x2 = bf2f(base[i + half]);
    base[i] = f2bf(x1 * cs - x2 * sn);
    base[i + half] = f2bf(x2 * cs + x1 * sn);
  }
}

__global__ void silu_mul_kernel(const uint16_t* gate_up, uint16_t* out, int64_t T, int I) {
  const int64_t total = T * I;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / I;
    const int i = int(e % I);
    const float g = bf2f(gate_up[t * 2 * I + i]);
    const float u = bf2f(gate_up[t * 2 * I + I + i]);
    out[e] = f2bf(g / (1.0f + __expf(-g)) * u);
  }
}

// Copies rows in 2-byte units (every dtype here is at least 2 bytes wide).
__global__ void gather_kernel(const uint16_t* x, const int32_t* idx, uint16_t* out, int T,
                              int64_t row_units) {
  const int64_t i = blockIdx.x;
  const int src = idx[i];
  const bool ok = src >= 0 && src < T;
  for (int64_t u = threadIdx.x; u < row_units; u += blockDim.x)
    out[i * row_units + u] = ok ? x[int64_t(src) * row_units + u] : uint16_t(0);
}

template <bool F32>
__global__ void argmax_kernel(const void* xv, int32_t* out, int V) {
  const int64_t row = blockIdx.x;
  float best = -FLT_MAX;
  int best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = F32 ? static_cast<const float*>(xv)[row * V + i]
                        : bf2f(static_cast<const uint16_t*>(xv)[row * V + i]);
    if (v > best || (v == best && i < best_i)) {
      best = v;
      best_i = i;
    }
  }
  // Warp then block reduction of (value, index), lowest index on ties.
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ov > best || (ov == best && oi < best_i)) {
      best = ov;
      best_i = oi;
    }
  }
  __shared__ float sv[32];
  __shared__ int si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      if (sv[w] > best || (sv[w] == best && si[w] < best_i)) {
        best = sv[w];
        best_i = si[w];
      }
    out[row] = best_i == 0x7fffffff ? 0 : best_i;  // all NaN: 0
  }
}

template <bool F32>
__global__ void add_bias_kernel(void* y, const uint16_t* bias, int64_t T, int N) {
  const int64_t total = T * N;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const float b = bf2f(bias[e % N]);
    if (F32) {
      static_cast<float*>(y)[e] += b;
    } else {
      uint16_t* p = static_cast<uint16_t*>(y) + e;
      *p = f2bf(bf2f(*p) + b);
    }
  }
}

__global__ void f32_to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    y[e] = f2bf(x[e]);
}

}  // namespace

cudaError_t embedding(const int32_t* ids, const bf16_t* table, bf16_t* out, int T, int V, int H,
                      cudaStream_t s) {
  if (T > 0) embedding_kernel<<<T, kThreads, 0, s>>>(ids, table, out, V, H);
  return cudaGetLastError();
}

cudaError_t rope(bf16_t* q, bf16_t* k, const int32_t* positions, const float* inv_freq, int T,
                 int hq, int hkv, int D, cudaStream_t s) {
  const int64_t n = int64_t(T) * (hq + hkv) * (D / 2);
  if (n > 0) rope_kernel<<<blocks_for(n), kThreads, 0, s>>>(q, k, positions, inv_freq, T, hq, hkv, D);
  return cudaGetLastError();
}

cudaError_t silu_mul(const bf16_t* gate_up, bf16_t* out, int T, int I, cudaStream_t s) {
  const int64_t n = int64_t(T) * I;
  if (n > 0) silu_mul_kernel<<<blocks_for(n), kThreads, 0, s>>>(gate_up, out, T, I);
  return cudaGetLastError();
}

cudaError_t gather_rows(const void* x, const int32_t* idx, void* out, int n, int T,
                        int64_t row_bytes, cudaStream_t s) {
  if (n > 0)
    gather_kernel<<<n, kThreads, 0, s>>>(static_cast<const uint16_t*>(x), idx,
                                         static_cast<uint16_t*>(out), T, row_bytes / 2);
  return cudaGetLastError();
}

cudaError_t argmax(const void* x, bool x_f32, int32_t* out, int n, int V, cudaStream_t s) {
  if (n > 0) {
    if (x_f32)
      argmax_kernel<true><<<n, 1024, 0, s>>>(x, out, V);
    else
      argmax_kernel<false><<<n, 1024, 0, s>>>(x, out, V);
  }
  return cudaGetLastError();
}

cudaError_t add_bias(void* y, bool y_f32, const bf16_t* bias, int T, int N, cudaStream_t s) {
  const int64_t n = int64_t(T) * N;
  if (n > 0) {
    if (y_f32)
      add_bias_kernel<true><<<blocks_for(n), kThreads, 0, s>>>(y, bias, T, N);
    else
      add_bias_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(y, bias, T, N);
  }
  return cudaGetLastError();
}

cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, cudaStream_t s) {
  if (n > 0) f32_to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

}  // namespace gs::cuda
