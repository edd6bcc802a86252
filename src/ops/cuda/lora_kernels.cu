// Batched LoRA kernels (punica's shrink and expand), launched with PDL (ops/cuda/launch.cuh) so
// that each one's launch and weight loads overlap the previous kernel. The slots (copied in
// before the forward) and the adapter weights (loaded between steps) are constant while a graph
// runs, so the kernels read them before pdl_wait(); x, tmp and y, which earlier kernels write,
// only after it.
//   shrink: at one token, one block per rank row whose threads prefetch up to 8 16-byte pieces
//           of the A row (all of K <= 8192 in bf16), then dot them with x and reduce into tmp[t, r]
//           (f32); from 2 tokens on, the rows form: a block of 256 threads per (token, 1 to 4 rank
//           rows), x read once for its rows.
//   expand: the columns of a fused target (q|k|v, gate|up) use only that target's rank rows
//           (the rest of B^T is zero): a third of qkv's, half of gate_up's. Below 64 tokens, one
//           block per (token, 32 groups of 16 bytes of columns) whose 4 warps split the rank
//           rows and reduce in shared memory (parallel: decode is latency-bound). From 64 tokens
//           on, punica's segmented (SGMV) form: a block per (32 column groups, chunk of 16
//           tokens, slot s) gathers the chunk's tokens of slot s and applies adapter s's B^T,
//           read once, to all of them (measured on an H200, tools/gpu/NOTES.md: 1 adapter at
//           bs 128 2.50 -> 2.20 ms per step, the 32-token prefill 8.9 -> 6.3 ms; equal at bs 32,
//           slower at bs 1; a segmented shrink lost everywhere but bs 128 spread).
//   fused: the expand folded into the op that consumes y (from 2 tokens on): split_qkv_rope
//          (no q/k norm), the gated activation (below 64 tokens) and the residual add + RMSNorm
//          after o and down; one kernel instead of two, y read once (tools/gpu/NOTES.md, v5).
// Odd shapes (a row not a multiple of 16 bytes, or unaligned) take scalar kernels, per token.
// Rows of the base model (slot < 0) and padding are skipped: a batch pays for its adapter
// tokens only.
#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "core/env.h"
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
constexpr int kRowsThreads = 256;  // the shrink's rows form (from 2 tokens): 256 threads, x read once a block
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

// The LoRA delta of one chunk of 8 columns of a token: sum of tr[r] * b[r N .. r N + 8) over the
// rank rows r = first, first + step, ... < rows (b: the slot's first rank row of the target at
// the chunk's first column; tr: the token's tmp at the same row). The first kHeld of those rows
// are loaded before pdl_wait() (adapter weights do not change while a graph runs); b null
// (a base-model row, a chunk past the row's end) adds nothing.
template <typename T, int kHeld>
struct ChunkRows {
  static constexpr int E = kVecElems<T>, V = 8 / E;  // 16-byte vectors per chunk row
  const T* b;
  int64_t N;
  int first, step, rows;
  uint4 held[kHeld][V];

  __device__ const uint4* row(int r) const { return reinterpret_cast<const uint4*>(b + int64_t(r) * N); }
  __device__ void prefetch() {
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int r = first + u * step;
#pragma unroll
      for (int i = 0; i < V; ++i) held[u][i] = b && r < rows ? __ldg(row(r) + i) : make_uint4(0, 0, 0, 0);
    }
  }
  __device__ static void fma_row(const uint4* w, float c, float* acc) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float f[E];
      unpack_vec<T>(w[i], f);
#pragma unroll
      for (int j = 0; j < E; ++j) acc[i * E + j] = fmaf(c, f[j], acc[i * E + j]);
    }
  }
  // acc[0 .. 8) += the delta; after pdl_wait() (the shrink wrote tr).
  __device__ void accumulate(const float* tr, float* acc) const {
    if (!b) return;
#pragma unroll
    for (int u = 0; u < kHeld; ++u) {
      const int r = first + u * step;
      if (r < rows) fma_row(held[u], tr[r], acc);
    }
    for (int r = first + kHeld * step; r < rows; r += step) {
      uint4 w[V];
#pragma unroll
      for (int i = 0; i < V; ++i) w[i] = __ldg(row(r) + i);
      fma_row(w, tr[r], acc);
    }
  }
};

// Rank rows of a chunk a fused-op thread holds across pdl_wait(): 64 registers at one chunk.
template <typename T>
constexpr int kHeldRows = sizeof(T) == 2 ? 16 : 8;
constexpr int kNormThreads = 256;

// One block per token: each thread C chunks of 8 columns of the row (x += delta rounded to T,
// residual += x, then the row's RMSNorm), x read before the block's reduction, out written after
// it (out may alias x).
template <typename T, typename Rs, int C>
__global__ void __launch_bounds__(kNormThreads)
    lora_expand_add_rms_norm_kernel(const float* __restrict__ tmp, const T* __restrict__ bt,
                                    const int32_t* __restrict__ slots, Rs* residual, const T* x, const T* w, float eps,
                                    T* out, int H, int R, int S) {
  const int64_t t = blockIdx.x;
  const int slot = slots[t];
  const bool lora = slot >= 0 && slot < S;
  ChunkRows<T, kHeldRows<T> / C> d[C];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * kNormThreads) * 8;
    d[c] = {lora && e < H ? bt + int64_t(slot) * R * H + e : nullptr, H, 0, 1, R};
    d[c].prefetch();
  }
  pdl_wait();
  pdl_trigger();
  float v[C][8] = {};
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * kNormThreads) * 8;
    if (e >= H) break;
    float acc[8] = {}, r[8];
    load8(x + t * H + e, v[c]);
    load8(residual + t * H + e, r);
    d[c].accumulate(tmp + t * R, acc);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float y = to_f(from_f<T>(v[c][i] + acc[i]));
      r[i] = v[c][i] = to_f(from_f<Rs>(r[i] + y));
      ss += v[c][i] * v[c][i];
    }
    store8(residual + t * H + e, r);
  }
  const float inv = rsqrtf(block_sum(ss) / float(H) + eps);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * kNormThreads) * 8;
    if (e >= H) break;
    float wf[8];
    load8(w + e, wf);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[c][i] *= inv * wf[i];
    store8(out + t * H + e, v[c]);
  }
}

// A block per (token, 32 chunks of 8 columns): warps 0, 1 take the gate chunk's even and odd rank
// rows, warps 2, 3 the up chunk's; warp 0 sums the four through shared memory, adds the gate and up
// values (rounded to T, as lora_expand stores them) and applies the activation.
template <GatedActivation A, typename T>
__global__ void __launch_bounds__(kSlices * 32)
    lora_expand_gated_kernel(const float* __restrict__ tmp, const T* __restrict__ bt, const int32_t* __restrict__ slots,
                             const T* gate_up, T* out, int I, int R, int S) {
  static_assert(kSlices == 4, "two warps per target");
  __shared__ float part[kSlices - 1][32][8];
  const int64_t t = blockIdx.x;
  const int slot = slots[t];
  const int slice = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int e = (int(blockIdx.y) * 32 + lane) * 8, target = slice >> 1, rows = R / 2;
  const bool on = e < I;
  ChunkRows<T, kHeldRows<T> / 2> d{
      on && slot >= 0 && slot < S ? bt + (int64_t(slot) * R + target * rows) * 2 * I + target * I + e : nullptr,
      2 * int64_t(I), slice & 1, 2, rows};
  d.prefetch();
  pdl_wait();
  pdl_trigger();
  float g[8] = {}, u[8] = {}, acc[8] = {};
  if (slice == 0 && on) {  // loaded now, overlapping the tmp loads below
    load8(gate_up + t * 2 * I + e, g);
    load8(gate_up + t * 2 * I + I + e, u);
  }
  d.accumulate(tmp + t * R + target * rows, acc);
  if (slice > 0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) part[slice - 1][lane][i] = acc[i];
  }
  __syncthreads();
  if (slice > 0 || !on) return;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float gi = to_f(from_f<T>(g[i] + (acc[i] + part[0][lane][i])));
    const float ui = to_f(from_f<T>(u[i] + (part[1][lane][i] + part[2][lane][i])));
    g[i] = gated_act<A>(gi, ui);
  }
  store8(out + t * I + e, g);
}

// A block per token, kTph threads per head of its q | k | v row (D = 16 kTph): thread (h, c)
// holds the 8 rotary pairs (c + j, c + j + D/2) of head h, adds the delta of their two column
// chunks (rounded to T, as lora_expand stores them), then rotates q and k at the token's position
// with cos / sin tabulated once per token in shared memory (split_qkv_rope's angles: fp32
// position * inv_freq, accurate sincosf) and copies v. No q/k norm.
template <typename T, int kTph>
__global__ void lora_expand_split_qkv_rope_kernel(const float* __restrict__ tmp, const T* __restrict__ bt,
                                                  const int32_t* __restrict__ slots, LoraColumnParts parts, int R,
                                                  int S, const T* qkv, const int32_t* positions, const float* inv_freq,
                                                  T* q, T* k, T* v, int hq, int hkv, int long_from) {
  constexpr int half = kTph * 8, D = 2 * half;
  __shared__ float2 cs[half];
  const int64_t t = blockIdx.x;
  const int heads = hq + 2 * hkv, N = heads * D, c = (int(threadIdx.x) % kTph) * 8;
  const int h = int(blockIdx.y * blockDim.x + threadIdx.x) / kTph;  // past the row's heads: the table only
  const int col = h * D + c, target = int(col >= parts.begin1) + int(col >= parts.begin2);
  const int slot = slots[t];
  const bool lora = slot >= 0 && slot < S && h < heads;
  const T* b = lora ? bt + (int64_t(slot) * R + target * parts.rows) * N + col : nullptr;
  ChunkRows<T, kHeldRows<T>> da{b, N, 0, 1, parts.rows}, db{b ? b + half : nullptr, N, 0, 1, parts.rows};
  da.prefetch();
  db.prefetch();
  pdl_wait();
  pdl_trigger();
  const int pos = positions[t];
  const float* table = inv_freq + (long_from > 0 && pos >= long_from ? half : 0);
  for (int i = int(threadIdx.x); i < half; i += int(blockDim.x)) sincosf(float(pos) * table[i], &cs[i].y, &cs[i].x);
  __syncthreads();
  if (h >= heads) return;
  float a[8], bv[8], acc_a[8] = {}, acc_b[8] = {};
  load8(qkv + t * N + col, a);
  load8(qkv + t * N + col + half, bv);
  const float* tr = tmp + t * R + target * parts.rows;
  da.accumulate(tr, acc_a);
  db.accumulate(tr, acc_b);
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = to_f(from_f<T>(a[j] + acc_a[j])), bv[j] = to_f(from_f<T>(bv[j] + acc_b[j]));
  if (h >= hq + hkv) {
    T* dst = v + (t * hkv + (h - hq - hkv)) * D;
    store8(dst + c, a);
    store8(dst + half + c, bv);
    return;
  }
  store_rotated8(h < hq ? q + (t * hq + h) * D : k + (t * hkv + (h - hq)) * D, c, half, a, bv, cs);
}

unsigned ceil_div(int a, int b) { return unsigned((a + b - 1) / b); }

// The rows form's A pieces a thread holds: 16 / this (GS_LORA_SHRINK_SPLIT, A/B).
// Measured on an H200 (tools/gpu/NOTES.md, LoRA v5): 4 (1 to 4 rank rows a block, more blocks)
// beats 1 at bs 32 (1.509 -> 1.477 ms a step) and 128 (2.285 -> 2.250); 8 ties, 16 loses.
int shrink_split() {
  static const int split = env_int("GS_LORA_SHRINK_SPLIT", 1, INT_MAX, 4);
  return split;
}

// Heads of a token a block of the fused qkv expand takes (GS_LORA_QKV_HEADS; 16: 3 blocks a
// token of llama3.2-1b, measured 1.477 -> 1.465 ms at bs 32 against all heads in one block).
int qkv_heads_per_block() {
  static const int hb = env_int("GS_LORA_QKV_HEADS", 1, INT_MAX, 16);
  return hb;
}

// The shrink's rows form (a block per token and 16 / X rank rows, x read once for them) from this
// many tokens on; the per-row form below (GS_LORA_SHRINK_ROWS_FROM, A/B; 1: always). Measured
// on an H200: at one token the per-row form wins (1.277 -> 1.312 ms a step with the rows form).
int shrink_rows_from() {
  static const int from = env_int("GS_LORA_SHRINK_ROWS_FROM", 1, INT_MAX, 2);
  return from;
}

// At one token a block of kThreads per rank row (the most blocks: the GEMV beside it leaves SMs
// free); from shrink_rows_from() tokens the rows form, kRowsThreads threads per (token, 16 / (X
// split) rank rows), as long as a thread's X pieces cover K; past that kRowsPerBlock rows a block
// from kManyTokens tokens on.
template <typename T>
cudaError_t launch_shrink(const T* x, const T* a, const int32_t* slots, float* tmp, int T_, int K, int R, int S,
                          cudaStream_t s) {
  const int X = (K / kVecElems<T> + kRowsThreads - 1) / kRowsThreads;  // x vectors a thread of the rows form holds
  if (T_ >= shrink_rows_from() && X <= 16) {
    // RB = 16 / (X split) rank rows a block, at least 1 (GS_LORA_SHRINK_SPLIT: more, smaller blocks)
    auto go = [&](auto xc) {
      constexpr int Xc = decltype(xc)::value;
      const int rb = std::max(1, 16 / (Xc * shrink_split()));
      auto launch = [&](auto kernel, int b) {
        return launch_pdl(kernel, dim3(unsigned(T_), ceil_div(R, b)), dim3(kRowsThreads), 0, s, x, a, slots, tmp, K, R,
                          S);
      };
      if constexpr (Xc <= 1)
        if (rb >= 16) return launch(lora_shrink_kernel<T, 16, Xc, kRowsThreads>, 16);
      if constexpr (Xc <= 2)
        if (rb >= 8) return launch(lora_shrink_kernel<T, 8, Xc, kRowsThreads>, 8);
      if constexpr (Xc <= 4)
        if (rb >= 4) return launch(lora_shrink_kernel<T, 4, Xc, kRowsThreads>, 4);
      if constexpr (Xc <= 8)
        if (rb >= 2) return launch(lora_shrink_kernel<T, 2, Xc, kRowsThreads>, 2);
      return launch(lora_shrink_kernel<T, 1, Xc, kRowsThreads>, 1);
    };
    if (X == 1) return go(std::integral_constant<int, 1>{});
    if (X == 2) return go(std::integral_constant<int, 2>{});
    if (X <= 4) return go(std::integral_constant<int, 4>{});
    if (X <= 8) return go(std::integral_constant<int, 8>{});
    return go(std::integral_constant<int, 16>{});
  }
  if (T_ >= kManyTokens)
    return launch_pdl(lora_shrink_kernel<T, kRowsPerBlock, kTokenPrefetch / kRowsPerBlock, kThreads>,
                      dim3(unsigned(T_), ceil_div(R, kRowsPerBlock)), dim3(kThreads), 0, s, x, a, slots, tmp, K, R, S);
  return launch_pdl(lora_shrink_kernel<T, 1, kTokenPrefetch, kThreads>, dim3(unsigned(T_), unsigned(R)), dim3(kThreads),
                    0, s, x, a, slots, tmp, K, R, S);
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

template <typename T, typename Rs>
bool lora_expand_add_rms_norm(const float* tmp, const T* bt, const int32_t* slots, Rs* residual, const T* x, const T* w,
                              float eps, T* out, int T_, int H, int R, int S, cudaStream_t s, cudaError_t* err) {
  const int chunks = H / 8;
  if (H % 8 != 0 || chunks > 4 * kNormThreads || !vec_aligned(bt, x, w, out, residual)) return false;
  if (T_ == 0) return true;
  if (chunks <= kNormThreads)
    *err = launch_pdl(lora_expand_add_rms_norm_kernel<T, Rs, 1>, unsigned(T_), kNormThreads, 0, s, tmp, bt, slots,
                      residual, x, w, eps, out, H, R, S);
  else if (chunks <= 2 * kNormThreads)
    *err = launch_pdl(lora_expand_add_rms_norm_kernel<T, Rs, 2>, unsigned(T_), kNormThreads, 0, s, tmp, bt, slots,
                      residual, x, w, eps, out, H, R, S);
  else
    *err = launch_pdl(lora_expand_add_rms_norm_kernel<T, Rs, 4>, unsigned(T_), kNormThreads, 0, s, tmp, bt, slots,
                      residual, x, w, eps, out, H, R, S);
  return true;
}

template <typename T>
bool lora_expand_gated_activation(GatedActivation act, const float* tmp, const T* bt, const int32_t* slots,
                                  const T* gate_up, T* out, int T_, int I, int R, int S, cudaStream_t s,
                                  cudaError_t* err) {
  if (I % 8 != 0 || R % 2 != 0 || T_ >= kManyTokens || !vec_aligned(bt, gate_up, out)) return false;
  if (T_ == 0) return true;
  const dim3 grid(unsigned(T_), ceil_div(I / 8, 32));
  *err = act == GatedActivation::GeluTanh ? launch_pdl(lora_expand_gated_kernel<GatedActivation::GeluTanh, T>, grid,
                                                       dim3(kSlices * 32), 0, s, tmp, bt, slots, gate_up, out, I, R, S)
                                          : launch_pdl(lora_expand_gated_kernel<GatedActivation::Silu, T>, grid,
                                                       dim3(kSlices * 32), 0, s, tmp, bt, slots, gate_up, out, I, R, S);
  return true;
}

template <typename T>
bool lora_expand_split_qkv_rope(const float* tmp, const T* bt, const int32_t* slots, LoraColumnParts parts, int R,
                                int S, const T* qkv, const int32_t* positions, const float* inv_freq, T* q, T* k, T* v,
                                int T_, int hq, int hkv, int D, int long_from, cudaStream_t s, cudaError_t* err) {
  const int heads = hq + 2 * hkv, hb = std::min(heads, qkv_heads_per_block()), threads = hb * (D / 16);
  const bool heads_split = parts.begin1 == hq * D && parts.begin2 == (hq + hkv) * D && parts.rows * 3 == R;
  if (D % 16 != 0 || threads > 1024 || !heads_split || !vec_aligned(bt, qkv, q, k, v)) return false;
  if (T_ == 0) return true;
  auto go = [&](auto kernel) {
    *err = launch_pdl(kernel, dim3(unsigned(T_), ceil_div(heads, hb)), unsigned(threads), 0, s, tmp, bt, slots, parts,
                      R, S, qkv, positions, inv_freq, q, k, v, hq, hkv, long_from);
    return true;
  };
  switch (D / 16) {
    case 2: return go(lora_expand_split_qkv_rope_kernel<T, 2>);
    case 4: return go(lora_expand_split_qkv_rope_kernel<T, 4>);
    case 8: return go(lora_expand_split_qkv_rope_kernel<T, 8>);
    case 16: return go(lora_expand_split_qkv_rope_kernel<T, 16>);
    default: return false;
  }
}

#define GS_INSTANTIATE_LORA(T)                                                                                         \
  template cudaError_t lora_shrink<T>(const T*, const T*, const int32_t*, float*, int, int, int, int, cudaStream_t);   \
  template cudaError_t lora_expand<T>(const float*, const T*, const int32_t*, T*, int, int, int, int, LoraColumnParts, \
                                      cudaStream_t);
GS_INSTANTIATE_LORA(bf16_t)
GS_INSTANTIATE_LORA(float)
#undef GS_INSTANTIATE_LORA
template bool lora_expand_gated_activation<bf16_t>(GatedActivation, const float*, const bf16_t*, const int32_t*,
                                                   const bf16_t*, bf16_t*, int, int, int, int, cudaStream_t,
                                                   cudaError_t*);
template bool lora_expand_gated_activation<float>(GatedActivation, const float*, const float*, const int32_t*,
                                                  const float*, float*, int, int, int, int, cudaStream_t, cudaError_t*);
#define GS_INSTANTIATE_LORA_NORM(T, Rs)                                                                          \
  template bool lora_expand_add_rms_norm<T, Rs>(const float*, const T*, const int32_t*, Rs*, const T*, const T*, \
                                                float, T*, int, int, int, int, cudaStream_t, cudaError_t*);
#define GS_INSTANTIATE_LORA_QKV(T)                                                                                    \
  template bool lora_expand_split_qkv_rope<T>(const float*, const T*, const int32_t*, LoraColumnParts, int, int,      \
                                              const T*, const int32_t*, const float*, T*, T*, T*, int, int, int, int, \
                                              int, cudaStream_t, cudaError_t*);
GS_INSTANTIATE_LORA_QKV(bf16_t)
GS_INSTANTIATE_LORA_QKV(float)
#undef GS_INSTANTIATE_LORA_QKV
GS_INSTANTIATE_LORA_NORM(bf16_t, bf16_t)
GS_INSTANTIATE_LORA_NORM(bf16_t, float)
GS_INSTANTIATE_LORA_NORM(float, float)
#undef GS_INSTANTIATE_LORA_NORM

}  // namespace gs::cuda
