// Batched LoRA kernels, launched with PDL (ops/cuda/launch.cuh) so that each one's launch and
// weight loads overlap the previous kernel. The slots (copied in before the forward) and the
// adapter weights (loaded between steps) are constant while a graph runs, so both kernels read
// them before pdl_wait(); x, tmp and y, which earlier kernels write, only after it.
//   shrink: one block per (token, rank row), or per (token, 4 rank rows) from 64 tokens on; its
//           threads prefetch up to kPrefetch 16-byte pieces of the A rows (one row: all of
//           K <= 8192 in bf16), then dot them with x (each piece read once for all the rows)
//           and reduce into tmp[t, r] (f32).
//   expand: one block per (token, 32 groups of 16 bytes of output columns); its 4 warps split
//           the rank rows, prefetching their B^T pieces (coalesced rows), then weight them by
//           tmp and reduce across warps in shared memory before y += .
// Odd shapes (a row not a multiple of 16 bytes, or unaligned) take scalar kernels. Rows of the
// base model (slot < 0) and padding return at once: a batch pays for its adapter tokens only.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/lora_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kShrinkThreads = 128;
constexpr int kPrefetch = 8;      // 16-byte A pieces per shrink thread held across pdl_wait()
constexpr int kRowsPerBlock = 4;  // rank rows of a shrink block from kManyTokens tokens on
constexpr int kManyTokens = 64;   // measured: 1 row a block is faster at bs 32, 4 at bs 128
constexpr int kSlices = 4;        // warps of an expand block: each takes every 4th rank row
constexpr int kGroups = 32;       // 16-byte column groups of an expand block (one per lane)
constexpr int kRowsHeld = 12;     // B^T pieces per expand thread held across pdl_wait() (R <= 48)
constexpr int kScalarThreads = 128;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T>
__device__ __forceinline__ float dot_vec(const uint4& xv, const uint4& av) {
  constexpr int E = kVecElems<T>;
  float xf[E], af[E];
  unpack_vec<T>(xv, xf);
  unpack_vec<T>(av, af);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < E; ++i) acc = fmaf(xf[i], af[i], acc);
  return acc;
}

// tmp[t, r0 .. r0+RB) = x[t] . a[slots[t], r] for the block's RB rank rows, with 16-byte loads
// (K a multiple of E, rows aligned). Each x piece is read once and used for all RB rows.
template <typename T, int RB>
__global__ void __launch_bounds__(kShrinkThreads)
    lora_shrink_kernel(const T* __restrict__ x, const T* __restrict__ a, const int32_t* __restrict__ slots,
                       float* __restrict__ tmp, int K, int R, int S) {
  constexpr int P = kPrefetch / RB;  // pieces of each row held across pdl_wait()
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
      const int kv = int(threadIdx.x) + u * kShrinkThreads;
      held[j][u] = j < rows && kv < KV ? __ldg(av + int64_t(j) * KV + kv) : make_uint4(0, 0, 0, 0);
    }
  pdl_wait();
  pdl_trigger();
  float acc[RB] = {};
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int kv = int(threadIdx.x) + u * kShrinkThreads;
    if (kv >= KV) break;
    const uint4 xq = xv[kv];  // plain loads: an earlier kernel wrote x
#pragma unroll
    for (int j = 0; j < RB; ++j) acc[j] += dot_vec<T>(xq, held[j][u]);
  }
  for (int kv = int(threadIdx.x) + P * kShrinkThreads; kv < KV; kv += kShrinkThreads) {
    const uint4 xq = xv[kv];
#pragma unroll
    for (int j = 0; j < RB; ++j)
      if (j < rows) acc[j] += dot_vec<T>(xq, __ldg(av + int64_t(j) * KV + kv));
  }
  __shared__ float part[RB][kShrinkThreads / 32];
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
    for (int w = 0; w < kShrinkThreads / 32; ++w) sum += part[threadIdx.x][w];
    tmp[int64_t(t) * R + r0 + int(threadIdx.x)] = sum;
  }
}

// y[t, g*E .. g*E+E) += sum_r tmp[t, r] bt[slots[t], r, g*E ..), 16-byte groups g.
template <typename T>
__global__ void __launch_bounds__(kSlices * 32)
    lora_expand_kernel(const float* __restrict__ tmp, const T* __restrict__ bt, const int32_t* __restrict__ slots,
                       T* __restrict__ y, int R, int N, int S) {
  constexpr int E = kVecElems<T>;
  __shared__ float part[kSlices - 1][kGroups][E];
  const int t = int(blockIdx.x);
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;
  const int slice = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int g = int(blockIdx.y) * kGroups + lane;
  const bool on = g * E < N;
  const T* b = bt + int64_t(slot) * R * N + int64_t(g) * E;
  uint4 held[kRowsHeld];
#pragma unroll
  for (int u = 0; u < kRowsHeld; ++u) {
    const int r = slice + u * kSlices;
    held[u] = on && r < R ? __ldg(reinterpret_cast<const uint4*>(b + int64_t(r) * N)) : make_uint4(0, 0, 0, 0);
  }
  pdl_wait();
  pdl_trigger();
  const float* tr = tmp + int64_t(t) * R;
  float acc[E] = {};
  auto add_row = [&](const uint4& w, float c) {
    float bf[E];
    unpack_vec<T>(w, bf);
#pragma unroll
    for (int i = 0; i < E; ++i) acc[i] = fmaf(c, bf[i], acc[i]);
  };
#pragma unroll
  for (int u = 0; u < kRowsHeld; ++u) {
    const int r = slice + u * kSlices;
    if (r < R) add_row(held[u], tr[r]);
  }
  if (on)
    for (int r = slice + kRowsHeld * kSlices; r < R; r += kSlices)
      add_row(__ldg(reinterpret_cast<const uint4*>(b + int64_t(r) * N)), tr[r]);
  if (slice > 0) {
#pragma unroll
    for (int i = 0; i < E; ++i) part[slice - 1][lane][i] = acc[i];
  }
  __syncthreads();
  if (slice > 0 || !on) return;
#pragma unroll
  for (int j = 0; j < kSlices - 1; ++j)
#pragma unroll
    for (int i = 0; i < E; ++i) acc[i] += part[j][lane][i];
  T* yp = y + int64_t(t) * N + int64_t(g) * E;
  float yf[E];
  unpack_vec<T>(*reinterpret_cast<const uint4*>(yp), yf);
  alignas(16) T out[E];
#pragma unroll
  for (int i = 0; i < E; ++i) out[i] = from_f<T>(yf[i] + acc[i]);
  *reinterpret_cast<uint4*>(yp) = *reinterpret_cast<const uint4*>(out);
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

template <typename T>
__global__ void __launch_bounds__(kScalarThreads)
    lora_expand_scalar(const float* tmp, const T* bt, const int32_t* slots, T* y, int R, int N, int S) {
  const int t = int(blockIdx.x);
  const int slot = slots[t];
  const int n = int(blockIdx.y) * kScalarThreads + int(threadIdx.x);
  if (slot < 0 || slot >= S) return;
  pdl_wait();
  pdl_trigger();
  if (n >= N) return;
  const float* tr = tmp + int64_t(t) * R;
  const T* b = bt + int64_t(slot) * R * N + n;
  float acc = 0.0f;
  for (int r = 0; r < R; ++r) acc = fmaf(tr[r], to_f(b[int64_t(r) * N]), acc);
  T* yp = y + int64_t(t) * N + n;
  *yp = from_f<T>(to_f(*yp) + acc);
}

unsigned ceil_div(int a, int b) { return unsigned((a + b - 1) / b); }

}  // namespace

template <typename T>
cudaError_t lora_apply(const T* x, const T* a, const T* bt, const int32_t* slots, float* tmp, T* y, int T_, int K,
                       int R, int N, int S, cudaStream_t s) {
  if (T_ == 0 || R == 0 || N == 0) return cudaSuccess;
  constexpr int E = kVecElems<T>;
  cudaError_t e;
  if (K % E == 0 && aligned16(x) && aligned16(a)) {
    // A block per (token, rank row) at small batches (more blocks to spread the A reads), per
    // (token, kRowsPerBlock rows) at larger ones (x read once for several rows, fewer blocks).
    if (T_ >= kManyTokens)
      e = launch_pdl(lora_shrink_kernel<T, kRowsPerBlock>, dim3(unsigned(T_), ceil_div(R, kRowsPerBlock)),
                     dim3(kShrinkThreads), 0, s, x, a, slots, tmp, K, R, S);
    else
      e = launch_pdl(lora_shrink_kernel<T, 1>, dim3(unsigned(T_), unsigned(R)), dim3(kShrinkThreads), 0, s, x, a, slots,
                     tmp, K, R, S);
  } else {
    e = launch_pdl(lora_shrink_scalar<T>, dim3(unsigned(T_), unsigned(R)), dim3(kScalarThreads), 0, s, x, a, slots, tmp,
                   K, R, S);
  }
  if (e != cudaSuccess) return e;
  if (N % E == 0 && aligned16(bt) && aligned16(y))
    return launch_pdl(lora_expand_kernel<T>, dim3(unsigned(T_), ceil_div(N / E, kGroups)), dim3(kSlices * 32), 0, s,
                      tmp, bt, slots, y, R, N, S);
  return launch_pdl(lora_expand_scalar<T>, dim3(unsigned(T_), ceil_div(N, kScalarThreads)), dim3(kScalarThreads), 0, s,
                    tmp, bt, slots, y, R, N, S);
}

#define GS_INSTANTIATE_LORA(T)                                                                                     \
  template cudaError_t lora_apply<T>(const T*, const T*, const T*, const int32_t*, float*, T*, int, int, int, int, \
                                     int, cudaStream_t);
GS_INSTANTIATE_LORA(bf16_t)
GS_INSTANTIATE_LORA(float)
#undef GS_INSTANTIATE_LORA

}  // namespace gs::cuda
