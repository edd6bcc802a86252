// The batched LoRA shrink (punica's): tmp[t, :] = x[t, :] a[s]^T for the adapter tokens, launched
// with PDL, A (constant while a graph runs) held across pdl_wait(), x read after it.
//   one token: a block per rank row whose threads prefetch up to 8 16-byte pieces of the A row
//              (all of K <= 8192 in bf16), then dot them with x and reduce into tmp[t, r] (f32);
//   from 2 tokens: the rows form, a block of 256 threads per (token, 1 to 4 rank rows), x read
//              once for its rows (more blocks than a block per chunk of one adapter's tokens,
//              which would read A once for them: the decode step is latency-bound).
// Odd shapes (K not a multiple of 16 bytes, or unaligned) take a scalar kernel, per token.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "ops/cuda/lora_common.cuh"

namespace gs::cuda {

namespace {

using namespace lora;

constexpr int kThreads = 128;
constexpr int kScalarThreads = 128;
// kTokenPrefetch A pieces a per-row thread holds; kRowsPerBlock rank rows a block of the one-
// token form takes from kManyTokens tokens on; kRowsThreads threads of the rows form.
constexpr int kTokenPrefetch = 8;
constexpr int kRowsThreads = 256;
constexpr int kRowsPerBlock = 4;
constexpr int kManyTokens = 64;

// Per token: tmp[t, r0 .. r0+RB) = x[t] . a[slots[t], r] for the block's RB rank rows, with 16-byte loads
// (K a multiple of E, rows aligned), by a block of N threads: thread i holds the pieces i + u N
// (u < P) of its RB rows of A across pdl_wait() (the rest it loads after), and reads each x piece
// once for all RB rows; each row's dot is then reduced over the block (shuffles, shared memory).
template <typename T, int RB, int P, int N>
__global__ void __launch_bounds__(N)
    lora_shrink_kernel(const T* __restrict__ x, const T* __restrict__ a, const int32_t* __restrict__ slots,
                       float* __restrict__ tmp, int K, int R, int S) {
  const int t = int(blockIdx.x), r0 = int(blockIdx.y) * RB;
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;  // uniform over the block
  const int KV = K / kVecElems<T>, rows = min(RB, R - r0);
  const uint4* av = reinterpret_cast<const uint4*>(a + (int64_t(slot) * R + r0) * K);  // row j at av + j * KV
  const uint4* xv = reinterpret_cast<const uint4*>(x + int64_t(t) * K);
  uint4 held[RB][P];
#pragma unroll
  for (int j = 0; j < RB; ++j)
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const int kv = int(threadIdx.x) + u * N;
      held[j][u] = j < rows && kv < KV ? __ldg(av + int64_t(j) * KV + kv) : make_uint4(0, 0, 0, 0);
    }
  pdl_wait();
  pdl_trigger();
  float acc[RB] = {};
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int kv = int(threadIdx.x) + u * N;
    if (kv >= KV) break;
    const uint4 xq = xv[kv];  // plain loads: an earlier kernel wrote x
#pragma unroll
    for (int j = 0; j < RB; ++j) acc[j] += dot_vec<T>(xq, held[j][u]);
  }
  for (int kv = int(threadIdx.x) + P * N; kv < KV; kv += N) {
    const uint4 xq = xv[kv];
#pragma unroll
    for (int j = 0; j < RB; ++j)
      if (j < rows) acc[j] += dot_vec<T>(xq, __ldg(av + int64_t(j) * KV + kv));
  }
  __shared__ float part[RB][N / 32];
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
#pragma unroll
  for (int j = 0; j < RB; ++j) {
    const float v = warp_sum(acc[j]);
    if (lane == 0) part[j][warp] = v;
  }
  __syncthreads();
  if (int(threadIdx.x) < rows) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < N / 32; ++w) sum += part[threadIdx.x][w];
    tmp[int64_t(t) * R + r0 + int(threadIdx.x)] = sum;
  }
}

// The scalar forms: shrink one block per (token, rank row), expand one thread per column.
template <typename T>
__global__ void __launch_bounds__(kScalarThreads)
    lora_shrink_scalar(const T* x, const T* a, const int32_t* slots, float* tmp, int K, int R, int S) {
  const int t = int(blockIdx.x), r = int(blockIdx.y);
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;
  pdl_wait();
  pdl_trigger();
  const T* xr = x + int64_t(t) * K;
  const T* ar = a + (int64_t(slot) * R + r) * K;
  float acc = 0.0f;
  for (int k = int(threadIdx.x); k < K; k += kScalarThreads) acc = fmaf(to_f(xr[k]), to_f(ar[k]), acc);
  acc = block_sum(acc);
  if (threadIdx.x == 0) tmp[int64_t(t) * R + r] = acc;
}

// The rows form's A pieces a thread holds: 16 / this (1 to 4 rank rows a block: more blocks than
// whole rows, fewer than single pieces).
constexpr int kShrinkSplit = 4;

// The shrink's rows form (a block per token and 16 / X rank rows, x read once for them) from this
// many tokens on; at one token the per-row form below is faster.
constexpr int kShrinkRowsFrom = 2;

// f(P) for the A pieces P (1, 2, 4, 8 or 16) a thread of kRowsThreads needs to cover X.
template <typename F>
cudaError_t with_pieces(int X, F&& f) {
  if (X == 1) return f(std::integral_constant<int, 1>{});
  if (X == 2) return f(std::integral_constant<int, 2>{});
  if (X <= 4) return f(std::integral_constant<int, 4>{});
  if (X <= 8) return f(std::integral_constant<int, 8>{});
  return f(std::integral_constant<int, 16>{});
}

// f(RB) for the most rank rows RB of {16, 8, 4, 2, 1} with RB <= rb and RB P <= 16 (held pieces).
template <int P, typename F>
cudaError_t with_rows(int rb, F&& f) {
  if constexpr (P <= 1)
    if (rb >= 16) return f(std::integral_constant<int, 16>{});
  if constexpr (P <= 2)
    if (rb >= 8) return f(std::integral_constant<int, 8>{});
  if constexpr (P <= 4)
    if (rb >= 4) return f(std::integral_constant<int, 4>{});
  if constexpr (P <= 8)
    if (rb >= 2) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 1>{});
}

// At one token a block of kThreads per rank row (the most blocks: the GEMV beside it leaves SMs
// free); from kShrinkRowsFrom tokens the rows form, kRowsThreads threads per (token, 16 / (X split) rank
// rows), as long as a thread's X pieces cover K; past that kRowsPerBlock rows a block from
// kManyTokens tokens on.
template <typename T>
cudaError_t launch_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                          cudaStream_t s) {
  const int X = (K / kVecElems<T> + kRowsThreads - 1) / kRowsThreads;  // x vectors a thread of the rows form holds
  if (T_ >= kShrinkRowsFrom && X <= 16)
    return with_pieces(X, [&](auto pc) {
      constexpr int P = decltype(pc)::value;
      return with_rows<P>(std::max(1, 16 / (P * kShrinkSplit)), [&](auto rc) {
        constexpr int RB = decltype(rc)::value;
        return launch_pdl(lora_shrink_kernel<T, RB, P, kRowsThreads>, dim3(unsigned(T_), ceil_div(R, RB)),
                          dim3(kRowsThreads), 0, s, x, a, slots, tmp, K, R, S);
      });
    });
  if (T_ >= kManyTokens)
    return launch_pdl(lora_shrink_kernel<T, kRowsPerBlock, kTokenPrefetch / kRowsPerBlock, kThreads>,
                      dim3(unsigned(T_), ceil_div(R, kRowsPerBlock)), dim3(kThreads), 0, s, x, a, slots, tmp, K, R, S);
  return launch_pdl(lora_shrink_kernel<T, 1, kTokenPrefetch, kThreads>, dim3(unsigned(T_), unsigned(R)), dim3(kThreads),
                    0, s, x, a, slots, tmp, K, R, S);
}

}  // namespace

template <typename T>
cudaError_t lora_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                        cudaStream_t s) {
  if (T_ == 0 || R == 0) return cudaSuccess;
  if (K % kVecElems<T> == 0 && aligned16(x) && aligned16(a)) return launch_shrink(x, a, slots, tmp, T_, K, R, S, s);
  return launch_pdl(lora_shrink_scalar<T>, dim3(unsigned(T_), unsigned(R)), dim3(kScalarThreads), 0, s, x, a, slots,
                    tmp, K, R, S);
}

template cudaError_t lora_shrink<bf16_t>(const bf16_t*, const bf16_t*, const int32_t*, float*, int, int, int, int,
                                         cudaStream_t);
template cudaError_t lora_shrink<float>(const float*, const float*, const int32_t*, float*, int, int, int, int,
                                        cudaStream_t);

}  // namespace gs::cuda
