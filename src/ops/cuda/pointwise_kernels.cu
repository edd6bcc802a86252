// Row-wise and element-wise kernels: embedding, the gated activation, gather, bias.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/e4m3.cuh"
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

// act(gate) * up of the 8 outputs from e of row t (16-byte vectors at g + e, u + e), read through
// the FP8 GEMM's scales where SC.
template <GatedActivation A, bool SC, typename T>
__device__ __forceinline__ void gated8(const T* g, const T* u, const OutputScales& sc, int64_t t, int e, int I,
                                       float (&o)[8]) {
  float uf[8];
  load8(g + e, o);
  load8(u + e, uf);
  scaled8<SC>(o, sc, t, e);
  scaled8<SC>(uf, sc, t, I + e);
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j] = gated_act<A>(o[j], uf[j]);
}

// act(gate) * up over rows of I outputs: blockIdx.y strides over the rows, x over the row's
// chunks of kChunk elements (no division per element). VEC: 16-byte loads and stores of 8
// elements (I % 8 == 0, aligned rows); otherwise one element per chunk. SC: gate_up read through
// the FP8 GEMM's scales (OutputScales).
template <GatedActivation A, bool VEC, bool SC, typename T>
__global__ void gated_activation_kernel(const T* gate_up, T* out, int T_, int I, OutputScales sc) {
  pdl_wait();
  pdl_trigger();
  constexpr int kChunk = VEC ? 8 : 1;
  const int chunks = I / kChunk;
  for (int64_t t = blockIdx.y; t < T_; t += gridDim.y) {
    const T* g = gate_up + t * 2 * I;
    const T* u = g + I;
    T* o = out + t * I;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += gridDim.x * blockDim.x) {
      if constexpr (VEC) {
        float v[8];
        gated8<A, SC>(g, u, sc, t, c * 8, I, v);
        store8(o + c * 8, v);
      } else {
        o[c] = from_f<T>(gated_act<A>(scaled<SC>(to_f(g[c]), sc, t, c), scaled<SC>(to_f(u[c]), sc, t, I + c)));
      }
    }
  }
}

// The same with out's FP8 copy (QuantizedOut): a block a row, each thread's chunks of 8 outputs
// kept packed as stored for the row's amax and the e4m3 stores.
constexpr int kGatedRowChunks = 4;  // chunks a thread: I <= 8 * 4 * 1024
template <GatedActivation A, bool SC>
__global__ void __launch_bounds__(1024)
    gated_activation_rows_kernel(const bf16_t* gate_up, bf16_t* out, int I, OutputScales sc, QuantizedOut qo) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  const bf16_t* g = gate_up + t * 2 * I;
  const bf16_t* u = g + I;
  uint4 p[kGatedRowChunks];
#pragma unroll
  for (int c = 0; c < kGatedRowChunks; ++c) {
    const int e = (int(threadIdx.x) + c * int(blockDim.x)) * 8;
    if (e >= I) break;
    float v[8];
    gated8<A, SC>(g, u, sc, t, e, I, v);
    p[c] = pack_vec<bf16_t>(v);
    *reinterpret_cast<uint4*>(out + t * I + e) = p[c];
  }
  store_e4m3_row(p, I, qo.q + t * I, qo.scales + t);
}

template <GatedActivation A, bool SC, typename T>
cudaError_t launch_gated(const T* gate_up, T* out, int T_, int I, OutputScales sc, QuantizedOut qo, cudaStream_t s) {
  const bool vec = I % 8 == 0 && vec_aligned(gate_up, out, sc.col, sc.bias);
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (qo.q && vec && I <= 8 * kGatedRowChunks * 1024 && vec_aligned(qo.q)) {
      const int threads = std::min(1024, (I / 8 + 31) / 32 * 32);
      return launch_pdl(gated_activation_rows_kernel<A, SC>, T_, threads, 0, s, gate_up, out, I, sc, qo);
    }
  }
  const int chunks = vec ? I / 8 : I;
  const dim3 grid(unsigned((chunks + kThreads - 1) / kThreads), unsigned(T_ < 65535 ? T_ : 65535));
  return quantize_out_after(
      vec ? launch_pdl(gated_activation_kernel<A, true, SC, T>, grid, kThreads, 0, s, gate_up, out, T_, I, sc)
          : launch_pdl(gated_activation_kernel<A, false, SC, T>, grid, kThreads, 0, s, gate_up, out, T_, I, sc),
      out, T_, I, qo, s);
}

template <GatedActivation A, typename T>
cudaError_t launch_gated(const T* gate_up, T* out, int T_, int I, OutputScales sc, QuantizedOut qo, cudaStream_t s) {
  return sc.row ? launch_gated<A, true>(gate_up, out, T_, I, sc, qo, s)
                : launch_gated<A, false>(gate_up, out, T_, I, sc, qo, s);
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
cudaError_t gated_activation(GatedActivation act, const T* gate_up, T* out, int T_, int I, cudaStream_t s,
                             OutputScales sc, QuantizedOut qo) {
  if (T_ <= 0 || I <= 0) return cudaGetLastError();
  return act == GatedActivation::GeluTanh ? launch_gated<GatedActivation::GeluTanh>(gate_up, out, T_, I, sc, qo, s)
                                          : launch_gated<GatedActivation::Silu>(gate_up, out, T_, I, sc, qo, s);
}

cudaError_t gather_rows(const void* x, const int32_t* idx, void* out, int n, int T, int64_t row_bytes, cudaStream_t s) {
  if (n <= 0) return cudaGetLastError();
  return launch_pdl(gather_kernel, n, kThreads, 0, s, static_cast<const uint16_t*>(x), idx, static_cast<uint16_t*>(out),
                    T, row_bytes / 2);
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

#define GS_INSTANTIATE(T)                                                                                       \
  template cudaError_t embedding<T, T>(const int32_t*, const T*, T*, int, int, int, cudaStream_t);              \
  template cudaError_t gated_activation<T>(GatedActivation, const T*, T*, int, int, cudaStream_t, OutputScales, \
                                           QuantizedOut);                                                       \
  template cudaError_t add_bias<T>(void*, bool, const T*, int, int, cudaStream_t);
GS_INSTANTIATE(bf16_t)
GS_INSTANTIATE(float)
#undef GS_INSTANTIATE
template cudaError_t embedding<bf16_t, float>(const int32_t*, const bf16_t*, float*, int, int, int, cudaStream_t);

}  // namespace gs::cuda
