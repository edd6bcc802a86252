// Row-wise and element-wise kernels: embedding, silu_mul, gather, argmax, bias.
#include <cfloat>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return int(b < 65535 * 32 ? b : 65535 * 32);
}

template <typename T, typename O>
__global__ void embedding_kernel(const int32_t* ids, const T* table, O* out, int V, int H) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  const int id = ids[t];
  O* o = out + t * H;
  const bool ok = id >= 0 && id < V;
  const T* row = table + int64_t(ok ? id : 0) * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) o[i] = from_f<O>(ok ? to_f(row[i]) : 0.0f);
}

template <typename T>
__global__ void silu_mul_kernel(const T* gate_up, T* out, int64_t T_, int I) {
  pdl_wait();
  pdl_trigger();
  const int64_t total = T_ * I;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / I;
    const int i = int(e % I);
    const float g = to_f(gate_up[t * 2 * I + i]);
    const float u = to_f(gate_up[t * 2 * I + I + i]);
    out[e] = from_f<T>(g / (1.0f + expf(-g)) * u);
  }
}

// Copies rows in 2-byte units (every dtype here is at least 2 bytes wide).
__global__ void gather_kernel(const uint16_t* x, const int32_t* idx, uint16_t* out, int T, int64_t row_units) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = blockIdx.x;
  const int src = idx[i];
  const bool ok = src >= 0 && src < T;
  for (int64_t u = threadIdx.x; u < row_units; u += blockDim.x)
    out[i * row_units + u] = ok ? x[int64_t(src) * row_units + u] : uint16_t(0);
}

template <bool F32>
__global__ void argmax_kernel(const void* xv, int32_t* out, int V) {
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  float best = -FLT_MAX;
  int best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    const float v =
        F32 ? static_cast<const float*>(xv)[row * V + i] : bf2f(static_cast<const uint16_t*>(xv)[row * V + i]);
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

template <typename T, typename Y>
__global__ void add_bias_kernel(Y* y, const T* bias, int64_t T_, int N) {
  const int64_t total = T_ * N;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x)
    y[e] = from_f<Y>(to_f(y[e]) + to_f(bias[e % N]));
}

}  // namespace

template <typename T, typename O>
cudaError_t embedding(const int32_t* ids, const T* table, O* out, int T_, int V, int H, cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_pdl(embedding_kernel<T, O>, T_, kThreads, 0, s, ids, table, out, V, H);
}

template <typename T>
cudaError_t silu_mul(const T* gate_up, T* out, int T_, int I, cudaStream_t s) {
  const int64_t n = int64_t(T_) * I;
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(silu_mul_kernel<T>, blocks_for(n), kThreads, 0, s, gate_up, out, T_, I);
}

cudaError_t gather_rows(const void* x, const int32_t* idx, void* out, int n, int T, int64_t row_bytes, cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(gather_kernel, n, kThreads, 0, s, static_cast<const uint16_t*>(x), idx, static_cast<uint16_t*>(out),
                    T, row_bytes / 2);
}

cudaError_t argmax(const void* x, bool x_f32, int32_t* out, int n, int V, cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(x_f32 ? argmax_kernel<true> : argmax_kernel<false>, n, 1024, 0, s, x, out, V);
}

template <typename T>
cudaError_t add_bias(void* y, bool y_f32, const T* bias, int T_, int N, cudaStream_t s) {
  const int64_t n = int64_t(T_) * N;
  if (n > 0) {
    if (y_f32)
      add_bias_kernel<T, float><<<blocks_for(n), kThreads, 0, s>>>(static_cast<float*>(y), bias, T_, N);
    else
      add_bias_kernel<T, T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(y), bias, T_, N);
  }
  return cudaGetLastError();
}

#define GS_INSTANTIATE(T)                                                                          \
  template cudaError_t embedding<T, T>(const int32_t*, const T*, T*, int, int, int, cudaStream_t); \
  template cudaError_t silu_mul<T>(const T*, T*, int, int, cudaStream_t);                          \
  template cudaError_t add_bias<T>(void*, bool, const T*, int, int, cudaStream_t);
GS_INSTANTIATE(bf16_t)
GS_INSTANTIATE(float)
#undef GS_INSTANTIATE
template cudaError_t embedding<bf16_t, float>(const int32_t*, const bf16_t*, float*, int, int, int, cudaStream_t);

}  // namespace gs::cuda
