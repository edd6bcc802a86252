// Bandwidth-bound GEMV for small M (decode): one warp per output streams R weight rows once
// with 16-byte loads (4 in flight per lane) and reuses them for all M rows of x, which stay in
// L1/L2. cuBLAS is launch/ramp bound at M = 1. An epilogue (ops/cuda/linear_epilogues.cuh)
// decides which rows a warp streams and what it stores, so the decode step's neighbours of a
// projection fold into it. Launched with PDL (ops/cuda/launch.cuh). The weights are in x's type,
// or e4m3 with f32 scales for the FP8 QKV with Qwen3's head norm.
#include <cooperative_groups.h>

#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/linear_epilogues.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kUnroll = 4;
constexpr int kWideMaxK = 8192;  // one warp an output takes the wide kernel up to this K (gemv_wide_kernel)

// The GEMV's input row, chunk kv (kVecElems<T> elements) at a time into xf (through the read-only
// path): x itself (XRow), or rms_norm(residual) * norm_w (NormedRow, one token) computed on the
// fly: xf = residual * norm_w, and the squares of the residual chunks a warp reads summed into ss,
// so that the kernel scales each output by 1 / rms(residual) at the end (x . w = (r * g) . w / rms).
template <typename T>
struct XRow {
  static constexpr bool kNormed = false, kBlockSs = false;
  const T* x;
  __device__ __forceinline__ float scale(float, int) const { return 1.0f; }
  __device__ __forceinline__ void load(int64_t K, int m, int kv, float (&xf)[kVecElems<T>], float&) const {
    unpack_vec<T>(__ldg(reinterpret_cast<const uint4*>(x + m * K) + kv), xf);
  }
  __device__ __forceinline__ void store_share(float, int, int, int) const {}
};
// The residual row the normed sources scale by: 1 / rms from its sum of squares.
struct ResidualRms {
  const float* residual;
  float eps;
  __device__ __forceinline__ float scale(float ss, int K) const { return rsqrtf(ss / float(K) + eps); }
};
template <typename T>
struct NormedRow : ResidualRms {
  static constexpr bool kNormed = true, kBlockSs = false;
  const T* norm_w;
  T* out = nullptr;  // GemvInput::normed
  // Chunk kv of the residual into r and of norm_w into g.
  __device__ __forceinline__ void chunk(int kv, float (&r)[kVecElems<T>], float (&g)[kVecElems<T>]) const {
    constexpr int V = kVecElems<T>;
#pragma unroll
    for (int i = 0; i < V / 4; ++i) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(residual) + kv * (V / 4) + i);
      r[4 * i] = f.x, r[4 * i + 1] = f.y, r[4 * i + 2] = f.z, r[4 * i + 3] = f.w;
    }
    unpack_vec<T>(__ldg(reinterpret_cast<const uint4*>(norm_w) + kv), g);
  }
  __device__ __forceinline__ void load(int64_t, int, int kv, float (&xf)[kVecElems<T>], float& ss) const {
    constexpr int V = kVecElems<T>;
    float r[V], g[V];
    chunk(kv, r, g);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      ss = fmaf(r[j], r[j], ss);
      xf[j] = r[j] * g[j];
    }
  }
  // Block blockIdx.x's share of out = residual * (inv * norm_w) (rms_norm's rounding), by its
  // threads tid = 0 .. n - 1; nothing when out is not set.
  __device__ __forceinline__ void store_share(float inv, int K, int tid, int n) const {
    constexpr int V = kVecElems<T>;
    if (!out) return;
    const int chunks = K / V, per = (chunks + int(gridDim.x) - 1) / int(gridDim.x);
    const int end = min(chunks, (int(blockIdx.x) + 1) * per);
    for (int c = int(blockIdx.x) * per + tid; c < end; c += n) {
      float r[V], g[V];
      chunk(c, r, g);
#pragma unroll
      for (int j = 0; j < V; ++j) r[j] *= inv * g[j];
      reinterpret_cast<uint4*>(out)[c] = pack_vec<T>(r);
    }
  }
};

// The norm handoff's row (one token; GemvInput::xn, LinearKernelOptions::norm_handoff_min_k / max_k): x = xn,
// which the GEMV before stored as residual * norm_w rounded to T (ResidualAddHandoffEpilogue), read
// as XRow reads x. The sum of squares comes from the residual: each warp of a block sums its
// 1 / WARPS slice (slice_ss) and the block adds the slices in warp order (kBlockSs), so every block
// scales by the same 1 / rms.
template <typename T>
struct HandoffRow : ResidualRms {
  static constexpr bool kNormed = true, kBlockSs = true;
  const T* xn;
  T* out = nullptr;  // no normed store
  __device__ __forceinline__ void load(int64_t, int, int kv, float (&xf)[kVecElems<T>], float&) const {
    unpack_vec<T>(__ldg(reinterpret_cast<const uint4*>(xn) + kv), xf);
  }
  // This warp's slice of the residual, E float4 a lane loaded before the main loop into `early`
  // (load_slice) and summed after it with the rest (slice_ss), so that no load waits. The slice:
  // float4s [begin, end) of the row.
  __device__ __forceinline__ int2 slice_of(int warp, int warps, int K) const {
    const int n4 = K / 4;
    return make_int2(n4 * warp / warps, n4 * (warp + 1) / warps);
  }
  template <int E>
  __device__ __forceinline__ void load_slice(int warp, int warps, int K, int lane, float4 (&early)[E]) const {
    const auto [begin, end] = slice_of(warp, warps, K);
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const int i = begin + lane + 32 * j;
      early[j] = i < end ? __ldg(reinterpret_cast<const float4*>(residual) + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  template <int E>
  __device__ __forceinline__ float slice_ss(int warp, int warps, int K, int lane, const float4 (&early)[E]) const {
    const auto [begin, end] = slice_of(warp, warps, K);
    float ss = 0.0f;
    const auto add = [&](const float4& f) { ss = fmaf(f.x, f.x, fmaf(f.y, f.y, fmaf(f.z, f.z, fmaf(f.w, f.w, ss)))); };
#pragma unroll
    for (int j = 0; j < E; ++j) add(early[j]);
    for (int i = begin + lane + 32 * E; i < end; i += 32) add(__ldg(reinterpret_cast<const float4*>(residual) + i));
    return warp_sum(ss);
  }
  __device__ __forceinline__ void store_share(float, int, int, int) const {}
};

// The weights' element: T itself, or e4m3 rows with f32 scales (the FP8 linear's): one a row
// (E4m3Rows), which multiplies the row's dot product, or one a 128-k block of the row (E4m3Blocks,
// 128x128 block-scaled weights, the scales row-expanded [N, K / 128]), which multiplies each
// chunk's products as they are added. A 16-byte chunk holds kWeightElems weights (16 e4m3: 2 x
// chunks of bf16, within one 128-k block).
struct E4m3Rows {};
struct E4m3Blocks {};
template <typename W>
constexpr bool kE4m3 = std::is_same_v<W, E4m3Rows> || std::is_same_v<W, E4m3Blocks>;
template <typename T, typename W>
constexpr int kWeightElems = kE4m3<W> ? 16 : kVecElems<T>;
template <typename T, typename W>
using WeightPtr = std::conditional_t<kE4m3<W>, const uint8_t*, const T*>;

// acc[r][m] += w chunk kv of row r . the x chunks it spans of token m, each x chunk loaded once for
// the R rows (e4m3: widened to bf16 exactly, e4m3x16_to_bf16, then to f32; E4m3Blocks: the chunk's
// sum times its block's scale, from the row's scales at bscale[r]).
template <typename T, typename W, int M, int R, typename Src>
__device__ __forceinline__ void fma_chunk(const Src& src, const uint4 (&wv)[R], int64_t K, int kv, float (&acc)[R][M],
                                          float& ss, const float* const (&bscale)[R]) {
  constexpr int V = kVecElems<T>, XC = kWeightElems<T, W> / V;
  constexpr bool kBlocks = std::is_same_v<W, E4m3Blocks>;
  float bs[R];
#pragma unroll
  for (int r = 0; r < R; ++r) bs[r] = kBlocks ? __ldg(bscale[r] + kv * kWeightElems<T, W> / 128) : 1.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float part[R];
#pragma unroll
    for (int r = 0; r < R; ++r) part[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < XC; ++c) {
      float xf[V];
      src.load(K, m, kv * XC + c, xf, ss);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float wf[V];
        if constexpr (XC == 1) {
          unpack_vec<T>(wv[r], wf);
        } else {  // bf16 x, 16 e4m3 a weight chunk: elements 8c .. 8c + 7
          static_assert(std::is_same_v<T, bf16_t> && V == 8, "e4m3 weights with bf16 x");
          uint32_t b[8];
          e4m3x16_to_bf16(wv[r], b);
          unpack_vec<T>(make_uint4(b[4 * c], b[4 * c + 1], b[4 * c + 2], b[4 * c + 3]), wf);
        }
        float& a = kBlocks ? part[r] : acc[r][m];
#pragma unroll
        for (int j = 0; j < V; ++j) a = fmaf(wf[j], xf[j], a);
      }
    }
    if constexpr (kBlocks) {
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][m] = fmaf(part[r], bs[r], acc[r][m]);
    }
  }
}

// Stores warp `warp`'s output n (lane 0) through a head-norm epilogue. The thread-block cluster
// computes one head (its blocks' WARPS outputs each, a pair of rows an output): each block sums
// its pairs' squares in shared memory, the cluster's sums are read through distributed shared
// memory in rank order (the same bits every run), and the second cluster barrier keeps every
// block's sum alive until the others have read it.
template <int WARPS, typename Epi>
__device__ __forceinline__ void store_head_normed(const Epi& epi, int n, const float (&v)[Epi::R], int warp, int lane) {
  namespace cg = cooperative_groups;
  __shared__ float part[WARPS];
  __shared__ float block_ss;
  const float2 ab = epi.inputs(n, v);
  float inv_rms = 1.0f;
  if (epi.normed(n)) {  // the same for the whole cluster (one head)
    const cg::cluster_group cluster = cg::this_cluster();
    if (lane == 0) part[warp] = ab.x * ab.x + ab.y * ab.y;
    __syncthreads();
    if (threadIdx.x == 0) {
      float ss = 0.0f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) ss += part[w];
      block_ss = ss;
    }
    cluster.sync();
    float ss = 0.0f;
    if (lane == 0)
      for (unsigned r = 0; r < cluster.num_blocks(); ++r) ss += *cluster.map_shared_rank(&block_ss, r);
    cluster.sync();
    inv_rms = rsqrtf(ss / float(2 * epi.half) + epi.eps);
  }
  if (lane == 0) epi.store_pair(n, 0, ab, inv_rms);
}

// One warp per output n < N (KS > 1: KS warps per output, each over a contiguous 1 / KS of K,
// summed through shared memory in a fixed order): streams the epilogue's R weight rows of n, then
// stores. A NormedRow source scales the sums by 1 / rms of the residual row first.
// e4m3 weights take wscale, their rows' scales ([N] or, E4m3Blocks, [N, K / 128]).
template <typename T, int M, typename Src, typename Epi, int WARPS, int KS, typename W = T>
__device__ __forceinline__ void gemv_rows(const Src& src, WeightPtr<T, W> __restrict__ w, const Epi& epi, int N, int K,
                                          const float* __restrict__ wscale = nullptr) {
  static_assert(KS == 1 || (M == 1 && WARPS % KS == 0), "split K: one token, whole outputs per block");
  static_assert(!Src::kNormed || M == 1, "the norm is fused for one token");
  static_assert(!Prefetches<Epi>::value || M == 1, "the prefetching epilogues store one token");
  constexpr int R = Epi::R;
  constexpr bool kRowScaled = std::is_same_v<W, E4m3Rows>, kBlocks = std::is_same_v<W, E4m3Blocks>;
  const int warp = int(threadIdx.x >> 5), lane = threadIdx.x & 31;
  const int n = int(blockIdx.x) * (WARPS / KS) + warp / KS;
  const uint4* wrow[R];
  float wsc[R];                 // the rows' scales (constant data: read before the wait) ...
  const float* bscale[R] = {};  // ... or their blocks' scales
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = epi.row(n < N ? n : 0, r);
    wrow[r] = reinterpret_cast<const uint4*>(w + row * K);
    wsc[r] = kRowScaled ? __ldg(wscale + row) : 1.0f;
    if constexpr (kBlocks) bscale[r] = wscale + row * (K / 128);
  }
  const int KV = K / kWeightElems<T, W>;
  // This warp's chunks [kv0, kv_end) of the row (the whole row when KS = 1).
  const int per = KS == 1 ? KV : (KV + 32 * KS - 1) / (32 * KS) * 32;
  const int kv0 = min(KV, (warp % KS) * per), kv_end = min(KV, kv0 + per);
  int kv = kv0 + lane;
  // The first batch of weight loads (constant data) before pdl_wait(): it overlaps the previous
  // kernel's tail. Then the plain loop (a guarded loop body measured 4-12% slower).
  // A row too short for a full batch (K = 576: 2-3 chunks a lane) loads all its chunks there, guarded.
  uint4 wv0[kUnroll][R];
  const bool first = n < N && kv + 32 * (kUnroll - 1) < kv_end;
  const bool few = !first && n < N;
  if (first) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv0[u][r] = __ldcs(wrow[r] + kv + 32 * u);
  } else if (few) {
#pragma unroll
    for (int u = 0; u < kUnroll - 1; ++u)
      if (kv + 32 * u < kv_end)
#pragma unroll
        for (int r = 0; r < R; ++r) wv0[u][r] = __ldcs(wrow[r] + kv + 32 * u);
  }
  // The trigger before the wait: the next kernel (attention, the next GEMV) launches while this one
  // still waits for its predecessor, so that its launch and its own first weight loads overlap this
  // one. No successor reads before its wait what this kernel's predecessor writes (launch.cuh).
  pdl_trigger();
  pdl_wait();
  // HandoffRow: this warp's slice of the residual's squares, added over the block at the end (every
  // warp of the block takes part, outputs or not).
  __shared__ float slice_ss[Src::kBlockSs ? WARPS : 1];
  float4 slice[Src::kBlockSs && WARPS < 16 ? 4 : 1];  // 16+ warps: one a lane (K 2048 at 16 warps) keeps 64 registers
  if constexpr (Src::kBlockSs) src.load_slice(warp, WARPS, K, lane, slice);
  // The thread that stores output n loads what the epilogue needs of it early.
  std::conditional_t<Prefetches<Epi>::value, float2, float> pre{};
  if constexpr (Prefetches<Epi>::value) {
    if (n < N && lane == 0 && warp % KS == 0) pre = epi.prefetch(n);
  }
  if (KS == 1 && n >= N && !Src::kBlockSs) return;  // never warp 0 (a block has at least one output)
  float acc[R][M], ss = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  if (first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk<T, W, M, R>(src, wv0[u], K, kv + 32 * u, acc, ss, bscale);
    kv += 32 * kUnroll;
  } else if (few) {
#pragma unroll
    for (int u = 0; u < kUnroll - 1; ++u)
      if (kv + 32 * u < kv_end) fma_chunk<T, W, M, R>(src, wv0[u], K, kv + 32 * u, acc, ss, bscale);
    kv = kv_end;
  }
  if (n >= N) kv = kv_end;  // split K: a block's warps past N only join the barrier below
  for (; kv + 32 * (kUnroll - 1) < kv_end; kv += 32 * kUnroll) {
    uint4 wv[kUnroll][R];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u][r] = __ldcs(wrow[r] + kv + 32 * u);  // streamed, used once
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk<T, W, M, R>(src, wv[u], K, kv + 32 * u, acc, ss, bscale);
  }
  for (; kv < kv_end; kv += 32) {
    uint4 wv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wv[r] = __ldcs(wrow[r] + kv);
    fma_chunk<T, W, M, R>(src, wv, K, kv, acc, ss, bscale);
  }

  if constexpr (Src::kBlockSs) {
    const float v = src.slice_ss(warp, WARPS, K, lane, slice);
    if (lane == 0) slice_ss[warp] = v;
  }
  if constexpr (KS > 1) {
    constexpr int P = R + (Src::kNormed ? 1 : 0);  // the R sums, then the sum of squares
    __shared__ float part[WARPS][P];
    __shared__ float inv;  // the block's first output's scale (thread 0's), for the normed row's store
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const float v = warp_sum(p < R ? acc[p][0] : ss);
      if (lane == 0) part[warp][p] = v;
    }
    __syncthreads();
    if (warp % KS == 0 && lane == 0 && n < N) {
      float v[P];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        v[p] = 0.0f;
#pragma unroll
        for (int k = 0; k < KS; ++k) v[p] += part[warp + k][p];
      }
      if constexpr (Src::kBlockSs) {
        v[P - 1] = 0.0f;
        for (int w = 0; w < WARPS; ++w) v[P - 1] += slice_ss[w];
      }
      const float scale = src.scale(v[P - 1], K);
      if (threadIdx.x == 0) inv = scale;
      float out[R];
#pragma unroll
      for (int r = 0; r < R; ++r) out[r] = (Src::kNormed ? v[r] * scale : v[r]) * wsc[r];
      if constexpr (Prefetches<Epi>::value)
        epi.store(n, 0, out, pre);
      else
        epi.store(n, 0, out);
    }
    if constexpr (Src::kNormed) {
      if (src.out) {  // the normed row's share of this block, scaled as its first output
        __syncthreads();
        src.store_share(inv, K, int(threadIdx.x), int(blockDim.x));
      }
    }
  } else {
    static_assert(!HeadNormed<Epi>::value || M == 1, "the head norm is fused for one token");
    float row_ss = 0.0f;
    if constexpr (Src::kBlockSs) {
      __syncthreads();
      for (int w = 0; w < WARPS; ++w) row_ss += slice_ss[w];
      if (n >= N) return;  // warps past N only added their slice
    } else if constexpr (Src::kNormed) {
      row_ss = warp_sum(ss);
    }
    const float scale = Src::kNormed ? src.scale(row_ss, K) : 1.0f;
    if (warp == 0) src.store_share(scale, K, lane, 32);  // XRow, or no normed store: nothing
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v[R];
#pragma unroll
      for (int r = 0; r < R; ++r) v[r] = (Src::kNormed ? warp_sum(acc[r][m]) * scale : warp_sum(acc[r][m])) * wsc[r];
      if constexpr (HeadNormed<Epi>::value)
        store_head_normed<WARPS>(epi, n, v, warp, lane);  // every lane: the block and cluster barriers
      else if (lane == m) {
        if constexpr (Prefetches<Epi>::value)
          epi.store(n, m, v, pre);
        else
          epi.store(n, m, v);
      }
    }
  }
}

template <typename T, int M, typename Src, typename Epi, int WARPS, int KS>
__global__ void __launch_bounds__(WARPS * 32) gemv_kernel(Src src, const T* __restrict__ w, Epi epi, int N, int K) {
  gemv_rows<T, M, Src, Epi, WARPS, KS>(src, w, epi, N, K);
  if constexpr (Finishes<Epi>::value) epi.finish();
}
// The same with a minimum of one block an SM, which lets ptxas use up to ~120 registers and hoist
// more of the unrolled loads: taken by the split-K GEMVs, those fusing the norm and one warp an
// output over K <= kWideMaxK (over longer rows the narrow bound is as fast).
template <typename T, int M, typename Src, typename Epi, int WARPS, int KS>
__global__ void __launch_bounds__(WARPS * 32, 1)
    gemv_wide_kernel(Src src, const T* __restrict__ w, Epi epi, int N, int K) {
  gemv_rows<T, M, Src, Epi, WARPS, KS>(src, w, epi, N, K);
  if constexpr (Finishes<Epi>::value) epi.finish();
}

// Warps per output of a GEMV reading x from global memory: split K when N alone leaves the GPU
// short of warps (< 4096 outputs: the decode step's o_proj, down and qkv at the 1B shape), as far
// as each warp keeps at least one full batch of kUnroll loads (K / 8 >= 32 kUnroll KS).
int gemv_k_split(int N, int KV) {
  if (N >= 4096) return 1;
  for (int ks : {4, 2})
    if (KV >= 32 * kUnroll * ks) return ks;
  return 1;
}

template <typename T, typename Src, typename Epi, int KS, int WARPS>
cudaError_t launch_split_k(const Src& src, const T* w, const Epi& epi, int N, int K, cudaStream_t s) {
  constexpr int per_block = WARPS / KS;
  const int blocks = (N + per_block - 1) / per_block;
  if constexpr (!Src::kNormed) {
    if (KS == 1 && K > kWideMaxK)
      return launch_pdl(gemv_kernel<T, 1, Src, Epi, WARPS, KS>, blocks, WARPS * 32, 0, s, src, w, epi, N, K);
  }
  return launch_pdl(gemv_wide_kernel<T, 1, Src, Epi, WARPS, KS>, blocks, WARPS * 32, 0, s, src, w, epi, N, K);
}

template <typename T, typename Src, typename Epi, int WARPS = kWarpsPerBlock>
cudaError_t launch_rows(const Src& src, const T* w, const Epi& epi, int N, int K, cudaStream_t s) {
  const int ks = gemv_k_split(N, K / kVecElems<T>);
  if (ks == 4) return launch_split_k<T, Src, Epi, 4, WARPS>(src, w, epi, N, K, s);
  if (ks == 2) return launch_split_k<T, Src, Epi, 2, WARPS>(src, w, epi, N, K, s);
  return launch_split_k<T, Src, Epi, 1, WARPS>(src, w, epi, N, K, s);
}

// The QKV GEMV with the q / k head norm: WARPS outputs a block, a cluster of half / WARPS blocks a
// head, no split K (a head's pairs are whole in its cluster). With the input norm fused (NormedRow)
// kHeadNormWarps a block at three blocks an SM: ptxas would otherwise take ~116 registers, two
// blocks an SM, and a head's cluster waits for room (Qwen3-0.6B's 32 heads); at 64 registers a
// larger block spills. Reading x (XRow) or the norm handoff's x (HandoffRow: its squares one
// float4 a lane at 32 warps, 64 registers in bf16), a head takes blocks of kHeadNormWideWarps
// where they make a cluster of 2 or more (2 at head dim 128, a block an SM), which is faster there
// (docs/PERF.md, "This round's other measurements"); but not on FP8 weights reading the handoff,
// whose e4m3 arithmetic and squares' slice spill at 64 registers, and which run faster at 8 warps.
constexpr int kHeadNormWarps = 8;
constexpr int kHeadNormWideWarps = 32;
// One warp an output, K unsplit, in blocks of WARPS warps at BLOCKS_PER_SM an SM: the head-norm
// GEMV's blocks (a head's a cluster) and the one-token QKV GEMV's wide blocks below.
template <typename T, typename W, typename Src, typename Epi, int WARPS, int BLOCKS_PER_SM>
__global__ void __launch_bounds__(WARPS * 32, BLOCKS_PER_SM)
    gemv_block_kernel(Src src, WeightPtr<T, W> __restrict__ w, Epi epi, int N, int K, const float* wscale) {
  gemv_rows<T, 1, Src, Epi, WARPS, 1, W>(src, w, epi, N, K, wscale);
}
// N / WARPS blocks of WARPS outputs, a head's half / WARPS of them a cluster.
template <typename T, typename W, typename Src, int WARPS, int BLOCKS_PER_SM>
cudaError_t launch_head_norm_blocks(const Src& src, WeightPtr<T, W> w, const float* wscale,
                                    const QkvRopeEpilogue<T, true>& epi, int N, int K, cudaStream_t s) {
  return launch_pdl_cluster(gemv_block_kernel<T, W, Src, QkvRopeEpilogue<T, true>, WARPS, BLOCKS_PER_SM>, N / WARPS,
                            WARPS * 32, 0, s, unsigned(epi.half / WARPS), src, w, epi, N, K, wscale);
}
template <typename T, typename W, typename Src>
cudaError_t launch_head_norm(const Src& src, WeightPtr<T, W> w, const float* wscale,
                             const QkvRopeEpilogue<T, true>& epi, int N, int K, cudaStream_t s) {
  if constexpr (!Src::kNormed || (Src::kBlockSs && std::is_same_v<W, T>)) {
    constexpr int WW = kHeadNormWideWarps;
    if (epi.half % WW == 0 && epi.half / WW >= 2)
      return launch_head_norm_blocks<T, W, Src, WW, 1>(src, w, wscale, epi, N, K, s);
  }
  return launch_head_norm_blocks<T, W, Src, kHeadNormWarps, 3>(src, w, wscale, epi, N, K, s);
}

// The one-token QKV GEMV's wide form (gemv_qkv_rope's wide_max_blocks): blocks of `warps` warps,
// one an SM.
template <typename T, typename Src, typename Epi>
cudaError_t launch_wide_blocks(const Src& src, const T* w, const Epi& epi, int N, int K, int warps, cudaStream_t s) {
  const auto go = [&](auto kernel, int W) {
    return launch_pdl(kernel, (N + W - 1) / W, W * 32, 0, s, src, w, epi, N, K, static_cast<const float*>(nullptr));
  };
  if (warps == 16) return go(gemv_block_kernel<T, T, Src, Epi, 16, 1>, 16);
  return go(gemv_block_kernel<T, T, Src, Epi, 32, 1>, 32);
}
// The fewer warps a block of 16 and 32 whose N outputs make at most max_blocks blocks; 0: neither,
// or rows shorter than kWideBlockMinK, where the QKV is too small a stream for attention's start to
// gain from it (docs/PERF.md, "Linear layers").
constexpr int kWideBlockMinK = 1024;
int wide_block_warps(int N, int K, int max_blocks) {
  if (K < kWideBlockMinK) return 0;
  for (int w : {16, 32})
    if ((N + w - 1) / w <= max_blocks) return w;
  return 0;
}

// launch(src) on in's row: the residual normed in the kernel (NormedRow), else x (XRow); where
// kHandoff (the norm handoff's consumers), the handed-off x and the residual's squares (HandoffRow)
// when in.xn is set.
template <bool kHandoff = false, typename T, typename F>
cudaError_t with_source(const GemvInput<T>& in, const F& launch) {
  if constexpr (kHandoff) {
    if (in.xn) return launch(HandoffRow<T>{{in.residual, in.eps}, in.xn});
  }
  if (in.residual) return launch(NormedRow<T>{{in.residual, in.eps}, in.norm_w, in.normed});
  return launch(XRow<T>{in.x});
}

template <bool kHandoff = false, typename T, typename Epi>
cudaError_t launch_gemv(const GemvInput<T>& in, const T* w, const Epi& epi, int N, int K, cudaStream_t s) {
  if (N <= 0) return cudaGetLastError();
  return with_source<kHandoff>(in, [&](const auto& src) {
    if constexpr (HeadNormed<Epi>::value)
      return launch_head_norm<T, T>(src, w, nullptr, epi, N, K, s);
    else
      return launch_rows(src, w, epi, N, K, s);
  });
}

}  // namespace

bool gemv_supported(int M, int K, int elem_bytes, const void* x, const void* w) {
  return M >= 1 && M <= kGemvMaxM && elem_bytes > 0 && K % (16 / elem_bytes) == 0 && vec_aligned(x, w);
}

template <typename T>
bool gemv_supported(int M, int K, const GemvInput<T>& in, const T* w) {
  const void* x = in.residual ? static_cast<const void*>(in.residual) : in.x;
  return gemv_supported(M, K, int(sizeof(T)), x, w) && (!in.residual || vec_aligned(in.norm_w)) &&
         (!in.xn || vec_aligned(in.xn));
}

template <typename T>
cudaError_t gemv(const GemvInput<T>& x, const T* w, const T* bias, void* y, bool y_f32, int M, int N, int K,
                 cudaStream_t s) {
  if (M != 1) return cudaErrorInvalidValue;
  return launch_gemv(x, w, PlainEpilogue<T>{bias, y, y_f32, N}, N, K, s);
}

template <typename T>
cudaError_t gemv_add_residual(const T* x, const T* w, float* residual, int M, int N, int K, cudaStream_t s,
                              const T* norm_w, T* xn) {
  if (M != 1 || (xn && !norm_w)) return cudaErrorInvalidValue;
  if (xn) return launch_rows(XRow<T>{x}, w, ResidualAddHandoffEpilogue<T>{residual, norm_w, xn}, N, K, s);
  return launch_rows(XRow<T>{x}, w, ResidualAddEpilogue<T>{residual, N}, N, K, s);
}

bool gemv_peer_sum_supported(int N, int K, int elem_bytes) {
  return peer_sum_shape_fits(N, kWarpsPerBlock * 32) && K > 0 && K % (16 / elem_bytes) == 0;
}

template <typename T>
cudaError_t gemv_peer_sum(const T* x, const T* w, T* y, float* residual, const T* norm_w, float eps, T* out, int N,
                          int K, const PeerSum& ps, cudaStream_t s) {
  if (!gemv_peer_sum_supported(N, K, int(sizeof(T))) || !peer_sum_fits(ps, N, sizeof(T))) return cudaErrorInvalidValue;
  return launch_rows(XRow<T>{x}, w, PeerSumEpilogue<T>{y, ps, residual, norm_w, eps, out, N}, N, K, s);
}

template <typename T>
cudaError_t gemv_gated(GatedActivation act, const GemvInput<T>& x, const T* w, T* out, int M, int I, int K,
                       cudaStream_t s) {
  if (M != 1) return cudaErrorInvalidValue;
  if (act == GatedActivation::GeluTanh)
    return launch_gemv<true>(x, w, GatedEpilogue<T, GatedActivation::GeluTanh>{out, I, false}, I, K, s);
  return launch_gemv<true>(x, w, GatedEpilogue<T, GatedActivation::Silu>{out, I, false}, I, K, s);
}

bool gemv_qk_norm_supported(int D) {
  const int half = D / 2;
  return D % 2 == 0 && half % kHeadNormWarps == 0 && half / kHeadNormWarps <= 8;  // 8: the portable cluster size
}

template <typename T>
cudaError_t gemv_qkv_rope(const GemvInput<T>& x, const T* w, const T* bias, const int32_t* positions,
                          const float* inv_freq, T* q, T* k, T* v, int M, int hq, int hkv, int D, int K, int long_from,
                          cudaStream_t s, const QkNorm<T>& qk_norm, int wide_max_blocks) {
  if (M != 1 || D % 2 != 0) return cudaErrorInvalidValue;
  const int half = D / 2, N = (hq + 2 * hkv) * half;
  if (qk_norm.q) {  // the inputs rounded to T first, as split_qkv_rope reads them
    if (!gemv_qk_norm_supported(D) || !qk_norm.k) return cudaErrorInvalidValue;
    return launch_gemv<true>(x, w,
                             QkvRopeEpilogue<T, true>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from,
                                                      true, qk_norm.q, qk_norm.k, qk_norm.eps},
                             N, K, s);
  }
  const QkvRopeEpilogue<T> epi{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from, false};
  if (const int warps = wide_block_warps(N, K, wide_max_blocks); warps > 0)
    return with_source<true>(x, [&](const auto& src) { return launch_wide_blocks(src, w, epi, N, K, warps, s); });
  return launch_gemv<true>(x, w, epi, N, K, s);
}

bool gemv_fp8_qk_norm_supported(int K, int D, int groups, const GemvInput<bf16_t>& in, const void* w,
                                const float* wscale) {
  const void* x = in.residual ? static_cast<const void*>(in.residual) : in.x;
  return gemv_fp8_qk_norm_shape_supported(K, D, groups) && vec_aligned(x, w) &&
         (!in.residual || vec_aligned(in.norm_w)) && wscale != nullptr;
}

bool gemv_fp8_qk_norm_shape_supported(int K, int D, int groups) {
  return gemv_qk_norm_supported(D) && K % 16 == 0 && (groups == 1 || (K % 128 == 0 && groups == K / 128));
}

cudaError_t gemv_fp8_qkv_rope_head_norm(const GemvInput<bf16_t>& x, const uint8_t* w, const float* wscale, int groups,
                                        const bf16_t* bias, const int32_t* positions, const float* inv_freq, bf16_t* q,
                                        bf16_t* k, bf16_t* v, int hq, int hkv, int D, int K, int long_from,
                                        cudaStream_t s, const QkNorm<bf16_t>& qk_norm) {
  if (!qk_norm.q || !qk_norm.k || !gemv_fp8_qk_norm_supported(K, D, groups, x, w, wscale)) return cudaErrorInvalidValue;
  const int half = D / 2, N = (hq + 2 * hkv) * half;
  const QkvRopeEpilogue<bf16_t, true> epi{bias, positions, inv_freq,  q,    k,         v,         hq,
                                          hkv,  half,      long_from, true, qk_norm.q, qk_norm.k, qk_norm.eps};
  return with_source<true>(x, [&](const auto& src) {
    if (groups == 1) return launch_head_norm<bf16_t, E4m3Rows>(src, w, wscale, epi, N, K, s);
    return launch_head_norm<bf16_t, E4m3Blocks>(src, w, wscale, epi, N, K, s);
  });
}

#define GS_INSTANTIATE(T)                                                                                              \
  template bool gemv_supported<T>(int, int, const GemvInput<T>&, const T*);                                            \
  template cudaError_t gemv<T>(const GemvInput<T>&, const T*, const T*, void*, bool, int, int, int, cudaStream_t);     \
  template cudaError_t gemv_add_residual<T>(const T*, const T*, float*, int, int, int, cudaStream_t, const T*, T*);    \
  template cudaError_t gemv_peer_sum<T>(const T*, const T*, T*, float*, const T*, float, T*, int, int, const PeerSum&, \
                                        cudaStream_t);                                                                 \
  template cudaError_t gemv_gated<T>(GatedActivation, const GemvInput<T>&, const T*, T*, int, int, int, cudaStream_t); \
  template cudaError_t gemv_qkv_rope<T>(const GemvInput<T>&, const T*, const T*, const int32_t*, const float*, T*, T*, \
                                        T*, int, int, int, int, int, int, cudaStream_t, const QkNorm<T>&, int);
GS_INSTANTIATE(bf16_t)
GS_INSTANTIATE(float)
#undef GS_INSTANTIATE

}  // namespace gs::cuda
