// Batched LoRA kernels in punica's segmented (SGMV) form, launched with PDL (ops/cuda/launch.cuh)
// so that each one's launch and weight loads overlap the previous kernel. The slots (copied in
// before the forward) and the adapter weights (loaded between steps) are constant while a graph
// runs, so both kernels read them before pdl_wait(); x, tmp and y, which earlier kernels write,
// only after it.
// Both grids are (work of one adapter, chunk of kChunk tokens, slot s): a block first gathers
// the tokens of its chunk whose slot is s (none: it returns at once), loads the part of adapter
// s it serves, and applies it to all of them. An adapter's weights are read once per chunk in
// which it appears instead of once per token (1 adapter at bs 128: 8 reads, not 128).
//   shrink: block = (RB rank rows); its threads split K, hold up to P 16-byte A pieces of each
//           row (all of K <= P * 128 * 16 bytes), dot them with x of G tokens at a time, and
//           reduce per token in shared memory into tmp[t, r] (f32).
//   expand: block = (32 groups of 16 bytes of output columns, one per lane); each lane holds
//           the B^T rows of its columns' fused target only (parts: the rest are zero), and the
//           4 warps split the chunk's tokens: y += .
// Odd shapes (a row not a multiple of 16 bytes, or unaligned) take scalar kernels, per token.
// Rows of the base model (slot < 0) and padding match no block: a batch pays for its adapter
// tokens only.
#include <cstdlib>

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
// The per-token forms (one block per token and piece of work; parallel, but every token reads
// its adapter's weights): kTokenPrefetch A pieces a shrink thread holds, kRowsPerBlock rank rows
// a shrink block takes from kManyTokens tokens on, kSlices warps of an expand block splitting
// the rank rows, kGroups 16-byte column groups of it, kSliceRowsHeld B^T rows a thread holds.
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
    lora_shrink_token_kernel(const T* __restrict__ x, const T* __restrict__ a, const int32_t* __restrict__ slots,
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
  T* yp = y + int64_t(t) * N + int64_t(g) * E;
  float yf[E];
  unpack_vec<T>(*reinterpret_cast<const uint4*>(yp), yf);
  alignas(16) T out[E];
#pragma unroll
  for (int i = 0; i < E; ++i) out[i] = from_f<T>(yf[i] + acc[i]);
  *reinterpret_cast<uint4*>(yp) = *reinterpret_cast<const uint4*>(out);
}

// tmp[t, r0 .. r0+RB) = x[t] . a[s, r] for the tokens t of the block's chunk with slot s, with
// 16-byte loads (K a multiple of E, rows aligned). G tokens' x pieces are loaded at a time.
template <typename T, int RB, int P, int G>
__global__ void __launch_bounds__(kThreads)
    lora_shrink_kernel(const T* __restrict__ x, const T* __restrict__ a, const int32_t* __restrict__ slots,
                       float* __restrict__ tmp, int T_, int K, int R) {
  __shared__ int toks[kChunk];
  __shared__ int count;
  __shared__ float part[kChunk][RB][kWarps];
  const int slot = int(blockIdx.z), r0 = int(blockIdx.x) * RB;
  const int n = gather_tokens(slots, slot, int(blockIdx.y) * kChunk, T_, toks, &count);
  if (n == 0) return;  // uniform over the block
  const int KV = K / kVecElems<T>, rows = min(RB, R - r0), tid = int(threadIdx.x);
  const uint4* av = reinterpret_cast<const uint4*>(a + (int64_t(slot) * R + r0) * K);  // row j at av + j * KV
  uint4 held[RB][P];
#pragma unroll
  for (int j = 0; j < RB; ++j)
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const int kv = tid + u * kThreads;
      held[j][u] = j < rows && kv < KV ? __ldg(av + int64_t(j) * KV + kv) : make_uint4(0, 0, 0, 0);
    }
  pdl_wait();
  pdl_trigger();
  const int lane = tid & 31, warp = tid >> 5;
  for (int i0 = 0; i0 < n; i0 += G) {
    uint4 xq[G][P];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const uint4* xv = reinterpret_cast<const uint4*>(x + int64_t(toks[min(i0 + g, n - 1)]) * K);
#pragma unroll
      for (int u = 0; u < P; ++u) {
        const int kv = tid + u * kThreads;
        xq[g][u] = i0 + g < n && kv < KV ? xv[kv] : make_uint4(0, 0, 0, 0);  // plain loads: x was just written
      }
    }
    float acc[G][RB] = {};
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int u = 0; u < P; ++u)
#pragma unroll
        for (int j = 0; j < RB; ++j) acc[g][j] += dot_vec<T>(xq[g][u], held[j][u]);
    for (int kv = tid + P * kThreads; kv < KV; kv += kThreads)  // K past what the threads hold
#pragma unroll
      for (int g = 0; g < G; ++g) {
        if (i0 + g >= n) break;
        const uint4 xg = reinterpret_cast<const uint4*>(x + int64_t(toks[i0 + g]) * K)[kv];
#pragma unroll
        for (int j = 0; j < RB; ++j)
          if (j < rows) acc[g][j] += dot_vec<T>(xg, __ldg(av + int64_t(j) * KV + kv));
      }
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int j = 0; j < RB; ++j) {
        const float v = warp_sum(acc[g][j]);
        if (lane == 0 && i0 + g < n) part[i0 + g][j][warp] = v;
      }
  }
  __syncthreads();
  for (int e = tid; e < n * rows; e += kThreads) {
    const int i = e / rows, j = e % rows;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += part[i][j][w];
    tmp[int64_t(toks[i]) * R + r0 + j] = sum;
  }
}

// y[t, g*E .. g*E+E) += sum_r tmp[t, r] bt[s, r, g*E ..) over the rank rows of the fused target
// of columns g (16-byte groups), for the tokens t of the block's chunk with slot s.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lora_expand_kernel(const float* __restrict__ tmp, const T* __restrict__ bt, const int32_t* __restrict__ slots,
                       T* __restrict__ y, int T_, int R, int N, LoraColumnParts parts) {
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
    const int i = warp + k * kWarps;
    if (i >= n) break;
    T* yp = y + int64_t(toks[i]) * N + int64_t(g) * E;
    float yf[E];
    unpack_vec<T>(*reinterpret_cast<const uint4*>(yp), yf);
#pragma unroll
    for (int e = 0; e < E; ++e) yf[e] += acc[k][e];
    *reinterpret_cast<uint4*>(yp) = pack_vec<T>(yf);
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

// Which kernels take the segmented form: GS_LORA_SEGMENTS = 0 (both per token), 1 (the shrink),
// 2 (the expand, the default), 3 (both), read once (A/B timing, as GS_CUDA_PDL).
int segment_mode() {
  static const int mode = [] {
    const char* e = std::getenv("GS_LORA_SEGMENTS");
    return e && e[0] >= '0' && e[0] <= '3' && e[1] == 0 ? e[0] - '0' : 2;
  }();
  return mode;
}

// The segmented shrink's (rank rows a block, A pieces a thread holds, tokens loaded at a time)
// for K, or the per-token shrink (a block per (token, rank row), per (token, kRowsPerBlock rows)
// from kManyTokens tokens on: x read once for several rows, fewer blocks).
template <typename T>
cudaError_t launch_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                          cudaStream_t s) {
  if ((segment_mode() & 1) == 0) {
    if (T_ >= kManyTokens)
      return launch_pdl(lora_shrink_token_kernel<T, kRowsPerBlock>, dim3(unsigned(T_), ceil_div(R, kRowsPerBlock)),
                        dim3(kThreads), 0, s, x, a, slots, tmp, K, R, S);
    return launch_pdl(lora_shrink_token_kernel<T, 1>, dim3(unsigned(T_), unsigned(R)), dim3(kThreads), 0, s, x, a,
                      slots, tmp, K, R, S);
  }
  const unsigned chunks = ceil_div(T_, kChunk);
  if (K / kVecElems<T> <= 2 * kThreads)  // K <= 2048 in bf16
    return launch_pdl(lora_shrink_kernel<T, 4, 2, 4>, dim3(ceil_div(R, 4), chunks, unsigned(S)), dim3(kThreads), 0, s,
                      x, a, slots, tmp, T_, K, R);
  if (K / kVecElems<T> <= 4 * kThreads)  // K <= 4096 in bf16
    return launch_pdl(lora_shrink_kernel<T, 4, 4, 2>, dim3(ceil_div(R, 4), chunks, unsigned(S)), dim3(kThreads), 0, s,
                      x, a, slots, tmp, T_, K, R);
  return launch_pdl(lora_shrink_kernel<T, 2, 8, 2>, dim3(ceil_div(R, 2), chunks, unsigned(S)), dim3(kThreads), 0, s, x,
                    a, slots, tmp, T_, K, R);
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
cudaError_t lora_apply(const T* x, const T* a, const T* bt, const int32_t* slots, float* tmp, T* y, int T_, int K,
                       int R, int N, int S, LoraColumnParts parts, cudaStream_t s) {
  if (T_ == 0 || R == 0 || N == 0) return cudaSuccess;
  constexpr int E = kVecElems<T>;
  cudaError_t e;
  if (K % E == 0 && aligned16(x) && aligned16(a))
    e = launch_shrink(x, a, slots, tmp, T_, K, R, S, s);
  else
    e = launch_pdl(lora_shrink_scalar<T>, dim3(unsigned(T_), unsigned(R)), dim3(kScalarThreads), 0, s, x, a, slots, tmp,
                   K, R, S);
  if (e != cudaSuccess) return e;
  if (N % E == 0 && aligned16(bt) && aligned16(y) && (segment_mode() & 2) == 0)
    return launch_pdl(lora_expand_token_kernel<T>, dim3(unsigned(T_), ceil_div(N / E, kGroups)), dim3(kSlices * 32), 0,
                      s, tmp, bt, slots, y, R, N, S, group_parts<T>(parts, R));
  if (N % E == 0 && aligned16(bt) && aligned16(y))
    return launch_pdl(lora_expand_kernel<T>, dim3(ceil_div(N / E, 32), ceil_div(T_, kChunk), unsigned(S)),
                      dim3(kThreads), 0, s, tmp, bt, slots, y, T_, R, N, group_parts<T>(parts, R));
  return launch_pdl(lora_expand_scalar<T>, dim3(unsigned(T_), ceil_div(N, kScalarThreads)), dim3(kScalarThreads), 0, s,
                    tmp, bt, slots, y, R, N, S);
}

#define GS_INSTANTIATE_LORA(T)                                                                                     \
  template cudaError_t lora_apply<T>(const T*, const T*, const T*, const int32_t*, float*, T*, int, int, int, int, \
                                     int, LoraColumnParts, cudaStream_t);
GS_INSTANTIATE_LORA(bf16_t)
GS_INSTANTIATE_LORA(float)
#undef GS_INSTANTIATE_LORA

}  // namespace gs::cuda
