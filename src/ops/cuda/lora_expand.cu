// The batched LoRA expand (punica's): y[t, :] += tmp[t, :] bt[s] for the adapter tokens, launched
// with PDL, B^T (constant while a graph runs) held across pdl_wait(), tmp and y read after it.
// The columns of a fused target (q|k|v, gate|up) use only that target's rank rows (the rest of
// B^T is zero): a third of qkv's, half of gate_up's.
//   per token (below 64 tokens): one block per (token, 32 groups of 16 bytes of columns) whose 4
//          warps split the rank rows and reduce in shared memory (parallel: decode is
//          latency-bound);
//   segmented (from 64 tokens, punica's SGMV form): a block per (32 column groups, chunk of 16
//          tokens, slot s) gathers the chunk's tokens of slot s and applies adapter s's B^T, read
//          once, to all of them (faster than per token from 64 tokens on, slower below).
// Most steps run the expand inside the op that consumes y instead (lora_fused.cu).
// Odd shapes (a row not a multiple of 16 bytes, or unaligned) take a scalar kernel, per token.
#include <climits>

#include "ops/cuda/lora_common.cuh"

namespace gs::cuda {

namespace {

using namespace lora;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 16;                       // tokens a block scans for its slot (<= 32: one ballot)
constexpr int kTokensPerWarp = kChunk / kWarps;  // segmented
constexpr int kRowsHeld = 16;                    // B^T rows a segmented lane holds across pdl_wait() (rank 16)
constexpr int kScalarThreads = 128;
constexpr int kManyTokens = 64;
// The per-token form: kSlices warps of a block splitting the rank rows, kGroups 16-byte column
// groups of it, kSliceRowsHeld B^T rows a thread holds.
constexpr int kSlices = 4;
constexpr int kGroups = 32;
constexpr int kSliceRowsHeld = 12;

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

template cudaError_t lora_expand<bf16_t>(const float*, const bf16_t*, const int32_t*, bf16_t*, int, int, int, int,
                                         LoraColumnParts, cudaStream_t);
template cudaError_t lora_expand<float>(const float*, const float*, const int32_t*, float*, int, int, int, int,
                                        LoraColumnParts, cudaStream_t);

}  // namespace gs::cuda
