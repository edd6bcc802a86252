// Batched LoRA kernels (punica's shrink and expand), launched with PDL (ops/cuda/launch.cuh) so
// that each one's launch and weight loads overlap the previous kernel. The slots (copied in
// before the forward) and the adapter weights (loaded between steps) are constant while a graph
// runs, so the kernels read them before pdl_wait(); x, tmp and y, which earlier kernels write,
// only after it.
//   shrink: one block per (token, rank row), or per (token, 4 rank rows) from 64 tokens on; its
//           threads prefetch up to 8 16-byte pieces of the A rows (one row: all of K <= 8192 in
//           bf16), then dot them with x and reduce into tmp[t, r] (f32).
//   expand: the columns of a fused target (q|k|v, gate|up) use only that target's rank rows
//           (the rest of B^T is zero): a third of qkv's, half of gate_up's. Below 64 tokens, one
//           block per (token, 32 groups of 16 bytes of columns) whose 4 warps split the rank
//           rows and reduce in shared memory (parallel: decode is latency-bound). From 64 tokens
//           on, punica's segmented (SGMV) form: a block per (32 column groups, chunk of 16
//           tokens, slot s) gathers the chunk's tokens of slot s and applies adapter s's B^T,
//           read once, to all of them (measured on an H200, tools/gpu/NOTES.md: 1 adapter at
//           bs 128 2.50 -> 2.20 ms per step, the 32-token prefill 8.9 -> 6.3 ms; equal at bs 32,
//           slower at bs 1; a segmented shrink lost everywhere but bs 128 spread).
// Odd shapes (a row not a multiple of 16 bytes, or unaligned) take scalar kernels, per token.
// Rows of the base model (slot < 0) and padding are skipped: a batch pays for its adapter
// tokens only.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/lora_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 16;                       // tokens a block scans for its slot (<= 32: one ballot)
constexpr int kTokensPerWarp = kChunk / kWarps;  // expand
constexpr int kRowsHeld = 16;                    // B^T rows an expand lane holds across pdl_wait() (rank 16)
constexpr int kScalarThreads = 128;
// The per-token forms (a block per token and piece of work: parallel, but every token reads its
// adapter's weights): kTokenPrefetch A pieces a shrink thread holds, kRowsPerBlock rank rows a
// shrink block takes from kManyTokens tokens on (where the expand is segmented), kSlices warps
// of an expand block splitting the rank rows, kGroups 16-byte column groups of it,
// kSliceRowsHeld B^T rows a thread holds.
constexpr int kTokenPrefetch = 8;
constexpr int kRowsPerBlock = 4;
constexpr int kManyTokens = 64;
constexpr int kSlices = 4;
constexpr int kGroups = 32;
constexpr int kSliceRowsHeld = 12;

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

// The tokens of [t0, t0 + kChunk) whose slot is `slot`, in increasing order into toks; returns
// their count to every thread (block-uniform). Reads only the slots (constant during a graph).
__device__ __forceinline__ int gather_tokens(const int32_t* __restrict__ slots, int slot, int t0, int T_, int* toks,
                                             int* count) {
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x), t = t0 + lane;
    const bool mine = lane < kChunk && t < T_ && slots[t] == slot;
    const unsigned m = __ballot_sync(0xffffffffu, mine);
    if (mine) toks[__popc(m & ((1u << lane) - 1u))] = t;
    if (lane == 0) *count = __popc(m);
  }
  __syncthreads();
  return *count;
}

// Per token: tmp[t, r0 .. r0+RB) = x[t] . a[slots[t], r] for the block's RB rank rows, with 16-byte loads
// (K a multiple of E, rows aligned). Each x piece is read once and used for all RB rows.
template <typename T, int RB>
__global__ void __launch_bounds__(kThreads)
    lora_shrink_kernel(const T* __restrict__ x, const T* __restrict__ a, const int32_t* __restrict__ slots,
                       float* __restrict__ tmp, int K, int R, int S) {
  constexpr int P = kTokenPrefetch / RB;  // pieces of each row held across pdl_wait()
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
      const int kv = int(threadIdx.x) + u * kThreads;
      held[j][u] = j < rows && kv < KV ? __ldg(av + int64_t(j) * KV + kv) : make_uint4(0, 0, 0, 0);
    }
  pdl_wait();
  pdl_trigger();
  float acc[RB] = {};
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int kv = int(threadIdx.x) + u * kThreads;
    if (kv >= KV) break;
    const uint4 xq = xv[kv];  // plain loads: an earlier kernel wrote x
#pragma unroll
    for (int j = 0; j < RB; ++j) acc[j] += dot_vec<T>(xq, held[j][u]);
  }
  for (int kv = int(threadIdx.x) + P * kThreads; kv < KV; kv += kThreads) {
    const uint4 xq = xv[kv];
#pragma unroll
    for (int j = 0; j < RB; ++j)
      if (j < rows) acc[j] += dot_vec<T>(xq, __ldg(av + int64_t(j) * KV + kv));
  }
  __shared__ float part[RB][kThreads / 32];
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
    for (int w = 0; w < kThreads / 32; ++w) sum += part[threadIdx.x][w];
    tmp[int64_t(t) * R + r0 + int(threadIdx.x)] = sum;
  }
}

// Per token: y[t, g*E .. g*E+E) += sum_r tmp[t, r] bt[slots[t], r, g*E ..), 16-byte groups g, over
// the rank rows of the columns' fused target; 4 warps split those rows and reduce in shared memory.
template <typename T>
__global__ void __launch_bounds__(kSlices * 32)
    lora_expand_token_kernel(const float* __restrict__ tmp, const T* __restrict__ bt, const int32_t* __restrict__ slots,
                             T* __restrict__ y, int R, int N, int S, LoraColumnParts parts) {
  constexpr int E = kVecElems<T>;
  __shared__ float part[kSlices - 1][kGroups][E];
  const int t = int(blockIdx.x);
  const int slot = slots[t];
  if (slot < 0 || slot >= S) return;
  const int slice = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int g = int(blockIdx.y) * kGroups + lane;
  const bool on = g * E < N;
  const int r0 = (int(g >= parts.begin1) + int(g >= parts.begin2)) * parts.rows, rows = parts.rows;
  const T* b = bt + (int64_t(slot) * R + r0) * N + int64_t(g) * E;
  uint4 held[kSliceRowsHeld];
#pragma unroll
  for (int u = 0; u < kSliceRowsHeld; ++u) {
    const int r = slice + u * kSlices;
    held[u] = on && r < rows ? __ldg(reinterpret_cast<const uint4*>(b + int64_t(r) * N)) : make_uint4(0, 0, 0, 0);
  }
  pdl_wait();
  pdl_trigger();
  T* yp = y + int64_t(t) * N + int64_t(g) * E;
  // slice 0 loads its y piece now, overlapping the tmp loads below (one L2 round trip less)
  const uint4 y0 = slice == 0 && on ? *reinterpret_cast<const uint4*>(yp) : make_uint4(0, 0, 0, 0);
  const float* tr = tmp + int64_t(t) * R + r0;
  float acc[E] = {};
  auto add_row = [&](const uint4& w, float c) {
    float bf[E];
    unpack_vec<T>(w, bf);
#pragma unroll
    for (int i = 0; i < E; ++i) acc[i] = fmaf(c, bf[i], acc[i]);
  };
#pragma unroll
  for (int u = 0; u < kSliceRowsHeld; ++u) {
    const int r = slice + u * kSlices;
    if (r < rows) add_row(held[u], tr[r]);
  }
  if (on)
    for (int r = slice + kSliceRowsHeld * kSlices; r < rows; r += kSlices)
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
  float yf[E];
  unpack_vec<T>(y0, yf);
  alignas(16) T out[E];
#pragma unroll
  for (int i = 0; i < E; ++i) out[i] = from_f<T>(yf[i] + acc[i]);
  *reinterpret_cast<uint4*>(yp) = *reinterpret_cast<const uint4*>(out);
}

// y[t, g*E .. g*E+E) += sum_r tmp[t, r] bt[s, r, g*E ..) over the rank rows of the fused target
// of columns g (16-byte groups), for the tokens t of the block's chunk with slot s.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lora_expand_segment_kernel(const float* __restrict__ tmp, const T* __restrict__ bt,
                               const int32_t* __restrict__ slots, T* __restrict__ y, int T_, int R, int N,
                               LoraColumnParts parts) {
  constexpr int E = kVecElems<T>;
  __shared__ int toks[kChunk];
  __shared__ int count;
  const int slot = int(blockIdx.z);
  const int n = gather_tokens(slots, slot, int(blockIdx.y) * kChunk, T_, toks, &count);
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  if (warp >= n) return;  // a warp serves tokens warp, warp + kWarps, ...: none left for it
  const int g = int(blockIdx.x) * 32 + lane;
  const bool on = g * E < N;
  const int r0 = (int(g >= parts.begin1) + int(g >= parts.begin2)) * parts.rows, rows = parts.rows;
  const T* b = bt + (int64_t(slot) * R + r0) * N + int64_t(g) * E;
  uint4 held[kRowsHeld];
#pragma unroll
  for (int u = 0; u < kRowsHeld; ++u)
    held[u] = on && u < rows ? __ldg(reinterpret_cast<const uint4*>(b + int64_t(u) * N)) : make_uint4(0, 0, 0, 0);
  pdl_wait();
  pdl_trigger();
  if (!on) return;
  T* yp[kTokensPerWarp];
  uint4 yv[kTokensPerWarp];  // loaded now, overlapping the tmp loads below
#pragma unroll
  for (int k = 0; k < kTokensPerWarp; ++k) {
    yp[k] = y + int64_t(toks[min(warp + k * kWarps, n - 1)]) * N + int64_t(g) * E;
    yv[k] = warp + k * kWarps < n ? *reinterpret_cast<const uint4*>(yp[k]) : make_uint4(0, 0, 0, 0);
  }
  const float* tr[kTokensPerWarp];
#pragma unroll
  for (int k = 0; k < kTokensPerWarp; ++k) tr[k] = tmp + int64_t(toks[min(warp + k * kWarps, n - 1)]) * R + r0;
  float acc[kTokensPerWarp][E] = {};
  auto add_row = [&](const uint4& w, int r) {
    float bf[E];
    unpack_vec<T>(w, bf);
#pragma unroll
    for (int k = 0; k < kTokensPerWarp; ++k) {
      const float c = tr[k][r];  // duplicates past n read a valid row and are never stored
#pragma unroll
      for (int i = 0; i < E; ++i) acc[k][i] = fmaf(c, bf[i], acc[k][i]);
    }
  };
#pragma unroll
  for (int u = 0; u < kRowsHeld; ++u)
    if (u < rows) add_row(held[u], u);
  for (int r = kRowsHeld; r < rows; ++r) add_row(__ldg(reinterpret_cast<const uint4*>(b + int64_t(r) * N)), r);
#pragma unroll
  for (int k = 0; k < kTokensPerWarp; ++k) {
    if (warp + k * kWarps >= n) break;
    float yf[E];
    unpack_vec<T>(yv[k], yf);
#pragma unroll
    for (int e = 0; e < E; ++e) yf[e] += acc[k][e];
    *reinterpret_cast<uint4*>(yp[k]) = pack_vec<T>(yf);
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

// A block per (token, rank row), per (token, kRowsPerBlock rows) from kManyTokens tokens on (x
// read once for several rows, fewer blocks).
template <typename T>
cudaError_t launch_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                          cudaStream_t s) {
  if (T_ >= kManyTokens)
    return launch_pdl(lora_shrink_kernel<T, kRowsPerBlock>, dim3(unsigned(T_), ceil_div(R, kRowsPerBlock)),
                      dim3(kThreads), 0, s, x, a, slots, tmp, K, R, S);
  return launch_pdl(lora_shrink_kernel<T, 1>, dim3(unsigned(T_), unsigned(R)), dim3(kThreads), 0, s, x, a, slots, tmp,
                    K, R, S);
}

// The expand's parts in 16-byte column groups: one target where a boundary splits a group.
template <typename T>
LoraColumnParts group_parts(LoraColumnParts p, int R) {
  constexpr int E = kVecElems<T>;
  const bool split = p.rows > 0 && p.rows < R;
  if (!split || p.begin1 % E != 0 || (p.begin2 != INT_MAX && p.begin2 % E != 0)) return {R, INT_MAX, INT_MAX};
  return {p.rows, p.begin1 / E, p.begin2 == INT_MAX ? INT_MAX : p.begin2 / E};
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

template <typename T>
cudaError_t lora_expand(const float* tmp, const T* bt, const int32_t* slots, T* y, int T_, int R, int N, int S,
                        LoraColumnParts parts, cudaStream_t s) {
  if (T_ == 0 || R == 0 || N == 0) return cudaSuccess;
  constexpr int E = kVecElems<T>;
  const bool vec = N % E == 0 && aligned16(bt) && aligned16(y);
  if (vec && T_ < kManyTokens)
    return launch_pdl(lora_expand_token_kernel<T>, dim3(unsigned(T_), ceil_div(N / E, kGroups)), dim3(kSlices * 32), 0,
                      s, tmp, bt, slots, y, R, N, S, group_parts<T>(parts, R));
  if (vec)
    return launch_pdl(lora_expand_segment_kernel<T>, dim3(ceil_div(N / E, 32), ceil_div(T_, kChunk), unsigned(S)),
                      dim3(kThreads), 0, s, tmp, bt, slots, y, T_, R, N, group_parts<T>(parts, R));
  return launch_pdl(lora_expand_scalar<T>, dim3(unsigned(T_), ceil_div(N, kScalarThreads)), dim3(kScalarThreads), 0, s,
                    tmp, bt, slots, y, R, N, S);
}

#define GS_INSTANTIATE_LORA(T)                                                                                         \
  template cudaError_t lora_shrink<T>(const T*, const T*, const int32_t*, float*, int, int, int, int, cudaStream_t);   \
  template cudaError_t lora_expand<T>(const float*, const T*, const int32_t*, T*, int, int, int, int, LoraColumnParts, \
                                      cudaStream_t);
GS_INSTANTIATE_LORA(bf16_t)
GS_INSTANTIATE_LORA(float)
#undef GS_INSTANTIATE_LORA

}  // namespace gs::cuda
