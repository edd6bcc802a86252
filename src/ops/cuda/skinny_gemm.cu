// Implements ops/cuda/skinny_gemm.h and the FP8 form of ops/cuda/fp8_kernels.h. A warp owns a
// tile of 16 weight rows (the rows of 16 / R outputs of its epilogue: rows g and g + 8 of the MMA's
// A fragment hold the gate and up row, or the rotary pair, of one output) and one of KS contiguous
// shares of K; a CTA holds 8 / KS tiles times KS shares. Weights go from global memory straight
// into registers, 16 bytes a lane, 4 lanes' contiguous bytes a row per load (streamed, used once),
// the way the M = 1 GEMV reads them. The dot product's k order is free, so a lane's 16 bytes (8
// consecutive bf16 k, or 16 e4m3 k widened to bf16 in registers) serve as its A-fragment slots of
// two (four) k16 MMAs, and x's B fragments (through L1, shared by the CTA's tiles) are read with
// the same permutation. Partials meet in shared memory and are summed over the shares in a fixed
// order: identical output run to run, and a token's row does not depend on M. FP8 rows carry one
// scale each, applied to the summed dot product before the epilogue, or (128x128 block-scaled
// weights) one a row and 128 k, by which each 128 k's products are multiplied as they are added to
// the accumulators (K shares then fall on 128 k). At one token on FP8 rows the
// input may be the RMS norm of the f32 residual (the deferred norm, ops/backend.h): each CTA
// stages x = residual * norm_w (bf16) in shared memory while summing the residual's squares, and
// scales the dot products by 1 / rms at the end (x . w = (r * g) . w / rms), as the bf16 GEMV's
// NormedRow does, so no norm kernel runs before the projection.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>

#include "core/cuda/cuda_device.h"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/linear_epilogues.cuh"
#include "ops/cuda/skinny_gemm.h"
#include "ops/cuda/tensor_core.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kU = 4;            // 16-byte loads per row and lane in a step (see kLoads)
constexpr int kWarpsPerSm = 16;  // warps in flight per SM the split aims at

// The weight rows of a tile: kK k a 16-byte load; where kScaled, scale(row) multiplies a row's
// summed dot products; where kNormed, x is the CTA's normed row in shared memory (stage_normed).
struct Bf16Rows {
  static constexpr bool kNormed = false;
  static constexpr int kK = 8;
  static constexpr bool kScaled = false;
  static constexpr bool kBlock = false;
  const bf16_t* w;
  __device__ const uint4* row(int64_t r, int K) const { return reinterpret_cast<const uint4*>(w + r * K); }
  // acc[nt] += rows (g, g + 8) . tokens of tile nt over this lane's 8 k at k: the k order (slots
  // 2t, 2t + 1, 2t + 8, 2t + 9 of two MMAs) is the same for weights (wa, wb) and x.
  template <int MT>
  __device__ void mma(const uint4& wa, const uint4& wb, const bf16_t* const (&xr)[MT / 8], int k,
                      float (&acc)[MT / 8][4]) const {
#pragma unroll
    for (int nt = 0; nt < MT / 8; ++nt) {
      const uint4 xv = __ldg(reinterpret_cast<const uint4*>(xr[nt] + k));
      mma_bf16(acc[nt], wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
      mma_bf16(acc[nt], wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
    }
  }
};

// e4m3 rows (ops/fp8_weights.h) with `groups` f32 scales each: 1 (whole-row scales), or with kBlock
// one for each 128 k (a 128x128 block's scale repeated over its rows: where every block starts on
// a multiple of 128 rows, row_shift 7 reads each block's first row, so that a warp's 16 rows share
// one address); kNormed: x is the CTA's normed row in shared memory (stage_normed).
template <bool kNormed_ = false, bool kBlock_ = false>
struct Fp8Rows {
  static constexpr bool kNormed = kNormed_;
  static constexpr int kK = 16;
  static constexpr bool kScaled = true;
  static constexpr bool kBlock = kBlock_;
  const uint8_t* w;
  const float* scales;
  int groups = 1;
  int row_shift = 0;
  __device__ const uint4* row(int64_t r, int K) const { return reinterpret_cast<const uint4*>(w + r * K); }
  // Row r's scale of k in [128 b, 128 (b + 1)) (whole-row scales: b = 0).
  __device__ float scale(int64_t r, int b = 0) const {
    return __ldg(scales + (r >> row_shift << row_shift) * groups + b);
  }
  // 16 bytes (16 k) of rows g and g + 8 widened to 8 bf16x2 each, k pairs in order; four MMAs.
  static __device__ __forceinline__ void widen(const uint4& v, uint32_t (&o)[8]) { e4m3x16_to_bf16(v, o); }
  template <int MT>
  __device__ void mma(const uint4& wa, const uint4& wb, const bf16_t* const (&xr)[MT / 8], int k,
                      float (&acc)[MT / 8][4]) const {
    uint32_t a[8], b[8];
    widen(wa, a);
    widen(wb, b);
#pragma unroll
    for (int nt = 0; nt < MT / 8; ++nt) {
      const uint4* xp = reinterpret_cast<const uint4*>(xr[nt] + k);
      uint4 x0, x1;
      if constexpr (kNormed)
        x0 = xp[0], x1 = xp[1];
      else
        x0 = __ldg(xp), x1 = __ldg(xp + 1);
      const uint32_t xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        mma_bf16(acc[nt], a[2 * j], b[2 * j], a[2 * j + 1], b[2 * j + 1], xs[2 * j], xs[2 * j + 1]);
    }
  }
};

// xs [K] (shared, bf16) = residual * norm_w of the one token (f32 products rounded to bf16);
// returns 1 / rms of the residual row to every thread. red: kWarps floats of shared scratch.
// Ends with a barrier.
__device__ float stage_normed(const GemvInput<bf16_t>& in, int K, bf16_t* xs, float* red) {
  float ss = 0.0f;
  for (int v = int(threadIdx.x); v < K / 8; v += kThreads) {
    const float4* r = reinterpret_cast<const float4*>(in.residual) + 2 * v;
    const float4 a = __ldg(r), b = __ldg(r + 1);
    const uint4 gv = __ldg(reinterpret_cast<const uint4*>(in.norm_w) + v);
    const float rv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    const uint32_t g[4] = {gv.x, gv.y, gv.z, gv.w};
    uint32_t o[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      ss = fmaf(rv[2 * j], rv[2 * j], fmaf(rv[2 * j + 1], rv[2 * j + 1], ss));
      const float lo = rv[2 * j] * __uint_as_float(g[j] << 16),
                  hi = rv[2 * j + 1] * __uint_as_float(g[j] & 0xffff0000u);
      o[j] = uint32_t(from_f<bf16_t>(lo)) | uint32_t(from_f<bf16_t>(hi)) << 16;
    }
    reinterpret_cast<uint4*>(xs)[v] = make_uint4(o[0], o[1], o[2], o[3]);
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) ss += red[i];
  return rsqrtf(ss / float(K) + in.eps);
}

// K's granule: 4 lanes' loads.
template <typename W>
constexpr int kGranule = 4 * W::kK;
// The k of one block scale; K's shares are multiples of kShare.
constexpr int kScaleBlock = 128;
template <typename W>
constexpr int kShare = W::kBlock ? kScaleBlock : kGranule<W>;
// 16-byte loads per row and lane in a step: kU, or on block-scaled rows above 8 tokens half of it
// (one scale block a step), which leaves registers for the 16-token tile's per-block sums.
template <typename W, int MT>
constexpr int kLoads = W::kBlock&& MT > 8 ? kU / 2 : kU;

// acc += p, rows g (p[.][0, 1]) times sa and g + 8 (p[.][2, 3]) times sb: one 128 k's products of
// block-scaled rows.
template <int NT>
__device__ __forceinline__ void add_scaled(float (&acc)[NT][4], const float (&p)[NT][4], float sa, float sb) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    acc[nt][0] = fmaf(p[nt][0], sa, acc[nt][0]);
    acc[nt][1] = fmaf(p[nt][1], sa, acc[nt][1]);
    acc[nt][2] = fmaf(p[nt][2], sb, acc[nt][2]);
    acc[nt][3] = fmaf(p[nt][3], sb, acc[nt][3]);
  }
}

// The head-norm epilogue (QkvRopeEpilogue<T, true>, Qwen3's q / k norm): a CTA's P pairs lie in one
// head and a thread-block cluster of half / P CTAs holds the whole head (launch_ks). Its shared
// scratch: the squares of each (token, pair) [MT][P], then each token's sum and 1 / rms [2][MT].
template <typename Epi>
constexpr int head_norm_floats(int MT, int P) {
  return HeadNormed<Epi>::value ? MT * P + 2 * MT : 0;
}

// Stores the M tokens' P pairs (value(it, n, m, v): item it = m P + pair) through the head norm:
// each token's squares summed in pair order, the cluster's sums read through distributed shared
// memory in rank order (the same bits every run), and the second cluster barrier keeps each CTA's
// sums alive until the others have read them.
template <int P, typename Epi, typename Value>
__device__ __forceinline__ void store_head_normed(const Epi& epi, int M, float* hn, const Value& value) {
  namespace cg = cooperative_groups;
  float *const sq = hn, *const tok_ss = hn + M * P, *const inv = tok_ss + M;
  for (int it = int(threadIdx.x); it < M * P; it += kThreads) {
    int n, m;
    float v[Epi::R];
    value(it, n, m, v);
    const float2 ab = epi.inputs(n, v);
    sq[it] = ab.x * ab.x + ab.y * ab.y;
  }
  __syncthreads();
  if (int(threadIdx.x) < M) {
    float ss = 0.0f;
    for (int q = 0; q < P; ++q) ss += sq[int(threadIdx.x) * P + q];
    tok_ss[threadIdx.x] = ss;
  }
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  if (int(threadIdx.x) < M) {
    float ss = 0.0f;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) ss += cluster.map_shared_rank(tok_ss, r)[threadIdx.x];
    inv[threadIdx.x] = rsqrtf(ss / float(2 * epi.half) + epi.eps);
  }
  cluster.sync();
  for (int it = int(threadIdx.x); it < M * P; it += kThreads) {
    int n, m;
    float v[Epi::R];
    value(it, n, m, v);
    epi.store_pair(n, m, epi.inputs(n, v), epi.normed(n) ? inv[m] : 1.0f);
  }
}

// The next step's weights load while this step multiplies (two register sets).
template <int MT, int KS, typename W, typename Epi>
__global__ void __launch_bounds__(kThreads, MT <= 64 ? 2 : 1)  // 2 CTAs (16 warps) an SM up to 64 tokens
    skinny_kernel(GemvInput<bf16_t> in, W w, Epi epi, int M, int n_out, int K) {
  constexpr int R = Epi::R, OW = 16 / R, G = kWarps / KS, PS = MT + 4, KK = W::kK;
  // [warp][16 rows][PS]; head norm: then head_norm_floats; normed: then red [kWarps], xs [K] bf16
  extern __shared__ float part[];
  float* const hn = part + kWarps * 16 * PS;
  float* const red = hn + head_norm_floats<Epi>(MT, G * OW);
  bf16_t* const xs = reinterpret_cast<bf16_t*>(red + kWarps);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int gi = warp / KS, si = warp % KS, n0 = (int(blockIdx.x) * G + gi) * OW;
  // This lane's weight rows: tile rows g and g + 8 (row i = output j = i % OW, part r = i / OW).
  const auto row_of = [&](int i) {
    const int n = n0 + i % OW;
    return epi.row(n < n_out ? n : 0, i / OW);
  };
  const int64_t ra = row_of(g), rb = row_of(g + 8);
  const uint4* wa_row = w.row(ra, K);
  const uint4* wb_row = w.row(rb, K);
  const bf16_t* xr[MT / 8];
#pragma unroll
  for (int nt = 0; nt < MT / 8; ++nt) xr[nt] = W::kNormed ? xs : in.x + int64_t(min(nt * 8 + g, M - 1)) * K;
  // This warp's share [k0, k1) of K (multiples of kShare); a step covers kStep at k + KK t + 4 KK u
  // (block-scaled rows: SB whole 128 k, kU / SB values of u each, since a step starts on a
  // multiple of 128).
  constexpr int kGran = kGranule<W>, U = kLoads<W, MT>, kStep = kGran * U, kSh = kShare<W>;
  constexpr int SB = W::kBlock ? kStep / kScaleBlock : 1, UB = U / SB;
  static_assert(!W::kBlock || SB * kScaleBlock == kStep, "a step is whole scale blocks");
  const int nc = K / kSh, k0 = si * nc / KS * kSh, k1 = (si + 1) * nc / KS * kSh;
  int k = k0;
  float acc[MT / 8][4] = {};
  uint4 wa[U], wb[U], wa2[U], wb2[U];
  float sa[SB], sb[SB], sa2[SB], sb2[SB];  // block-scaled rows: rows g's and g + 8's scales of a step
  const auto load = [&](uint4(&a)[U], uint4(&b)[U], float(&as)[SB], float(&bs)[SB], int kb) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      a[u] = __ldcs(wa_row + kb / KK + t + 4 * u);
      b[u] = __ldcs(wb_row + kb / KK + t + 4 * u);
    }
    if constexpr (W::kBlock) {
#pragma unroll
      for (int h = 0; h < SB; ++h) as[h] = w.scale(ra, kb / kScaleBlock + h), bs[h] = w.scale(rb, kb / kScaleBlock + h);
    }
  };
  const auto step = [&](const uint4(&a)[U], const uint4(&b)[U], const float(&as)[SB], const float(&bs)[SB], int kb) {
    if constexpr (W::kBlock) {
#pragma unroll
      for (int h = 0; h < SB; ++h) {
        float p[MT / 8][4] = {};
#pragma unroll
        for (int u = UB * h; u < UB * (h + 1); ++u) w.template mma<MT>(a[u], b[u], xr, kb + KK * t + kGran * u, p);
        add_scaled<MT / 8>(acc, p, as[h], bs[h]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) w.template mma<MT>(a[u], b[u], xr, kb + KK * t + kGran * u, acc);
    }
  };
  // The first step's weights (constant) before pdl_wait(): they overlap the previous kernel. So do
  // whole-row scales: a thread stores the same outputs for each of its items (kThreads is a
  // multiple of the CTA's G * OW outputs), and their scales wait in registers, where a load after
  // the partials' barrier would put a global round trip on the kernel's tail.
  const bool first = k + kStep <= k1;
  if (first) load(wa, wb, sa, sb, k);
  constexpr bool kRowScales = W::kScaled && !W::kBlock;
  static_assert(kThreads % (G * OW) == 0, "a thread's items share one output");
  float row_scale[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row_scale[r] = 1.0f;
  if constexpr (kRowScales) {
    const int q = int(threadIdx.x) % (G * OW), n = (int(blockIdx.x) * G + q / OW) * OW + q % OW;
#pragma unroll
    for (int r = 0; r < R; ++r) row_scale[r] = w.scale(epi.row(n < n_out ? n : 0, r));
  }
  pdl_wait();
  float inv_rms = 1.0f;
  if constexpr (W::kNormed) inv_rms = stage_normed(in, K, xs, red);
  pdl_trigger();
  // wa / wb hold step k on entry; each half loads the other set's step before multiplying.
  while (k + kStep <= k1) {
    const bool more = k + 2 * kStep <= k1;
    if (more) load(wa2, wb2, sa2, sb2, k + kStep);
    step(wa, wb, sa, sb, k);
    k += kStep;
    if (!more) break;
    const bool more2 = k + 2 * kStep <= k1;
    if (more2) load(wa, wb, sa, sb, k + kStep);
    step(wa2, wb2, sa2, sb2, k);
    k += kStep;
    if (!more2) break;
  }
  for (; k < k1; k += kGran) {
    const uint4 a = __ldcs(wa_row + k / KK + t);
    const uint4 b = __ldcs(wb_row + k / KK + t);
    if constexpr (W::kBlock) {
      float p[MT / 8][4] = {};
      w.template mma<MT>(a, b, xr, k + KK * t, p);
      add_scaled<MT / 8>(acc, p, w.scale(ra, k / kScaleBlock), w.scale(rb, k / kScaleBlock));
    } else {
      w.template mma<MT>(a, b, xr, k + KK * t, acc);
    }
  }

  store_tile_partials<MT>(part + warp * 16 * PS, PS, g, t, acc);
  __syncthreads();
  // Item it = (token m, tile tg, output j), consecutive threads on consecutive n: its output n and
  // the R dot products, summed over the shares and scaled. Every caller steps `it` by kThreads from
  // threadIdx.x, so n is the output whose scales row_scale holds.
  const auto value = [&](int it, int& n, int& m, float(&v)[R]) {
    m = it / (G * OW);
    const int q = it % (G * OW), tg = q / OW, j = q % OW;
    n = (int(blockIdx.x) * G + tg) * OW + j;
    sum_tile_partials<R, KS, OW>(part, PS, tg, j, m, v);
    if constexpr (W::kBlock) {
#pragma unroll
      for (int r = 0; r < R; ++r) v[r] *= inv_rms;
    } else if constexpr (kRowScales) {
#pragma unroll
      for (int r = 0; r < R; ++r) v[r] *= row_scale[r] * inv_rms;
    }
  };
  if constexpr (HeadNormed<Epi>::value) {
    store_head_normed<G * OW>(epi, M, hn, value);
  } else {
    for (int it = int(threadIdx.x); it < M * G * OW; it += kThreads) {
      int n, m;
      float v[R];
      value(it, n, m, v);
      if (n < n_out) epi.store(n, m, v);
    }
  }
  if constexpr (Finishes<Epi>::value) epi.finish();
}

// K shares per tile: the power of two (<= 8, at most K / unit) that brings the warp count closest
// to kWarpsPerSm per SM.
int pick_split(int tiles, int K, int unit) {
  const double target = double(cuda_current_sm_count(132)) * kWarpsPerSm;
  int best = 1;
  for (int ks = 2; ks <= kWarps; ks *= 2)
    if (K / unit >= ks && std::abs(std::log(tiles * ks / target)) < std::abs(std::log(tiles * best / target)))
      best = ks;
  return best;
}

template <int MT, int KS, typename W, typename Epi>
cudaError_t launch_ks(const GemvInput<bf16_t>& x, const W& w, const Epi& epi, int M, int n_out, int K, int tiles,
                      cudaStream_t s) {
  auto* kernel = skinny_kernel<MT, KS, W, Epi>;
  constexpr int G = kWarps / KS, P = G * 16 / Epi::R;
  size_t smem = (size_t(kWarps) * 16 * (MT + 4) + head_norm_floats<Epi>(MT, P)) * sizeof(float);
  if constexpr (W::kNormed) smem += kWarps * sizeof(float) + size_t(K) * sizeof(bf16_t);
  if (smem > 48 * 1024)
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
      return e;
  unsigned cluster = 1;
  if constexpr (HeadNormed<Epi>::value) cluster = unsigned(epi.half / P);
  return launch_pdl_cluster(kernel, (tiles + G - 1) / G, kThreads, smem, s, cluster, x, w, epi, M, n_out, K);
}

// The head norm's K shares: the nearest to ks (more first) whose CTAs (kWarps / ks tiles of 8
// rotary pairs each, launch_ks's P) tile a head of `half` pairs in a cluster of at most 8; 0 where
// none does.
int head_norm_split(int ks, int half) {
  const auto fits = [&](int s) {
    const int pairs = kWarps / s * 8;
    return s >= 1 && s <= kWarps && half % pairs == 0 && half / pairs <= 8;
  };
  for (int s = ks; s <= kWarps; s *= 2)
    if (fits(s)) return s;
  for (int s = ks / 2; s >= 1; s /= 2)
    if (fits(s)) return s;
  return 0;
}

template <int MT, typename W, typename Epi>
cudaError_t launch_mt(const GemvInput<bf16_t>& x, const W& w, const Epi& epi, int M, int n_out, int K, cudaStream_t s) {
  const int tiles = (n_out + 16 / Epi::R - 1) / (16 / Epi::R);
  int ks = pick_split(tiles, K, kShare<W>);
  if constexpr (HeadNormed<Epi>::value) {  // shares past K's units stay empty: slower, still exact
    ks = head_norm_split(ks, epi.half);
    if (ks == 0) return cudaErrorInvalidValue;
  }
  switch (ks) {
    case 8: return launch_ks<MT, 8>(x, w, epi, M, n_out, K, tiles, s);
    case 4: return launch_ks<MT, 4>(x, w, epi, M, n_out, K, tiles, s);
    case 2: return launch_ks<MT, 2>(x, w, epi, M, n_out, K, tiles, s);
    default: return launch_ks<MT, 1>(x, w, epi, M, n_out, K, tiles, s);
  }
}

// The token tile for M: 16, 32, 64 or 128 (FP8 rows: 8 up to 8 tokens, one token included;
// block-scaled rows up to kFp8BlockSkinnyMaxM).
template <typename W, typename Epi>
cudaError_t launch(const GemvInput<bf16_t>& x, const W& w, const Epi& epi, int M, int n_out, int K, cudaStream_t s) {
  const int min_m = W::kScaled ? 1 : kSkinnyMinM, max_m = W::kBlock ? kFp8BlockSkinnyMaxM : kSkinnyMaxM;
  if (M < min_m || M > max_m || K <= 0 || K % kShare<W> != 0) return cudaErrorInvalidValue;
  if (n_out <= 0) return cudaGetLastError();
  if constexpr (W::kNormed) {  // one token (fp8_skinny_norm_supported)
    if (M != 1 || !x.residual) return cudaErrorInvalidValue;
    return launch_mt<8>(x, w, epi, M, n_out, K, s);
  } else if constexpr (HeadNormed<Epi>::value) {  // FP8 rows, up to kSkinnyHeadNormMaxM tokens
    if (x.residual || M > kSkinnyHeadNormMaxM) return cudaErrorInvalidValue;
    return launch_mt<8>(x, w, epi, M, n_out, K, s);
  } else {
    if (x.residual) return cudaErrorInvalidValue;
    if constexpr (W::kScaled) {
      if (M <= 8) return launch_mt<8>(x, w, epi, M, n_out, K, s);
    }
    if constexpr (W::kBlock) {
      static_assert(kFp8BlockSkinnyMaxM == 16, "block-scaled rows take tiles of 8 and 16 tokens");
      return launch_mt<16>(x, w, epi, M, n_out, K, s);
    } else {
      if (M <= 16) return launch_mt<16>(x, w, epi, M, n_out, K, s);
      if (M <= 32) return launch_mt<32>(x, w, epi, M, n_out, K, s);
      if (M <= 64) return launch_mt<64>(x, w, epi, M, n_out, K, s);
      return launch_mt<128>(x, w, epi, M, n_out, K, s);
    }
  }
}

// The normed row of K (bf16) the kernel stages: at most 64 KiB of shared memory.
constexpr int kNormedMaxK = 32768;

// run(rows) on w's FP8 rows: the normed form where the input is the residual's norm, else plain;
// whole-row or block scales.
template <typename Run>
cudaError_t with_fp8_rows(const GemvInput<bf16_t>& x, const Fp8Scaled& w, int K, const Run& run) {
  if (w.groups == 1) {
    if (x.residual) return run(Fp8Rows<true>{w.w, w.scales});
    return run(Fp8Rows<>{w.w, w.scales});
  }
  if (w.groups != K / kScaleBlock) return cudaErrorInvalidValue;
  const int shift = w.blocks_aligned ? 7 : 0;
  if (x.residual) return run(Fp8Rows<true, true>{w.w, w.scales, w.groups, shift});
  return run(Fp8Rows<false, true>{w.w, w.scales, w.groups, shift});
}

template <typename Epi>
cudaError_t launch_fp8(const GemvInput<bf16_t>& x, const Fp8Scaled& w, const Epi& epi, int M, int n_out, int K,
                       cudaStream_t s) {
  return with_fp8_rows(x, w, K, [&](const auto& rows) { return launch(x, rows, epi, M, n_out, K, s); });
}

}  // namespace

bool skinny_supported(int M, int64_t N, int K, const void* x, const void* w) {
  const int64_t weights = N * K;
  const bool by_size = (M <= kSkinnyTokens && weights <= kSkinnyMaxWeights) ||
                       (M <= kSkinnySmallTokens && weights <= kSkinnySmallWeights);
  return M >= kSkinnyMinM && by_size && K > 0 && K % kGranule<Bf16Rows> == 0 && vec_aligned(x, w);
}

cudaError_t skinny_gemm(const bf16_t* x, const bf16_t* w, const bf16_t* bias, void* y, bool y_f32, int M, int N, int K,
                        cudaStream_t s) {
  return launch(x, Bf16Rows{w}, PlainEpilogue<bf16_t>{bias, y, y_f32, N}, M, N, K, s);
}

cudaError_t skinny_gemm_gated(GatedActivation act, const bf16_t* x, const bf16_t* w, bf16_t* out, int M, int I, int K,
                              cudaStream_t s) {
  if (act == GatedActivation::GeluTanh)
    return launch(x, Bf16Rows{w}, GatedEpilogue<bf16_t, GatedActivation::GeluTanh>{out, I, true}, M, I, K, s);
  return launch(x, Bf16Rows{w}, GatedEpilogue<bf16_t, GatedActivation::Silu>{out, I, true}, M, I, K, s);
}

namespace {
// The RoPE split's epilogue for launch(w, ...): on FP8 rows with the q / k head norm where qk.q is
// set.
template <typename W>
cudaError_t launch_qkv_rope(const GemvInput<bf16_t>& x, const W& w, const bf16_t* bias, const int32_t* positions,
                            const float* inv_freq, bf16_t* q, bf16_t* k, bf16_t* v, int M, int hq, int hkv, int D,
                            int K, int long_from, const QkNorm<bf16_t>& qk, cudaStream_t s) {
  if (D % 2 != 0) return cudaErrorInvalidValue;
  const int half = D / 2, n_out = (hq + 2 * hkv) * half;
  if constexpr (W::kScaled) {
    if (qk.q) {
      if (!skinny_qk_norm_supported(D)) return cudaErrorInvalidValue;
      return launch(x, w,
                    QkvRopeEpilogue<bf16_t, true>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from, true,
                                                  qk.q, qk.k, qk.eps},
                    M, n_out, K, s);
    }
  }
  return launch(x, w, QkvRopeEpilogue<bf16_t>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from, true}, M,
                n_out, K, s);
}
}  // namespace

bool skinny_qk_norm_supported(int D) { return D > 0 && D % 2 == 0 && head_norm_split(1, D / 2) != 0; }

cudaError_t skinny_gemm_qkv_rope(const bf16_t* x, const bf16_t* w, const bf16_t* bias, const int32_t* positions,
                                 const float* inv_freq, bf16_t* q, bf16_t* k, bf16_t* v, int M, int hq, int hkv, int D,
                                 int K, int long_from, cudaStream_t s) {
  return launch_qkv_rope(x, Bf16Rows{w}, bias, positions, inv_freq, q, k, v, M, hq, hkv, D, K, long_from, {}, s);
}

bool fp8_skinny_supported(int M, int K, int groups, const void* x, const void* w) {
  if (groups != 1)
    return groups > 1 && groups * kScaleBlock == K && M >= 1 && M <= kFp8BlockSkinnyMaxM && vec_aligned(x, w);
  return M >= 1 && M <= kSkinnyMaxM && K > 0 && K % kGranule<Fp8Rows<>> == 0 && vec_aligned(x, w);
}

bool fp8_skinny_norm_supported(int M, int K, int groups, const float* residual, const bf16_t* norm_w, const void* w) {
  return M == 1 && K <= kNormedMaxK && fp8_skinny_supported(M, K, groups, residual, w) && vec_aligned(norm_w);
}

cudaError_t fp8_skinny_gemm(const GemvInput<bf16_t>& x, const Fp8Scaled& w, const bf16_t* bias, void* y, bool y_f32,
                            int M, int N, int K, cudaStream_t s) {
  return launch_fp8(x, w, PlainEpilogue<bf16_t>{bias, y, y_f32, N}, M, N, K, s);
}

cudaError_t fp8_skinny_gemm_add_residual(const GemvInput<bf16_t>& x, const Fp8Scaled& w, float* residual, int M, int N,
                                         int K, cudaStream_t s) {
  return launch_fp8(x, w, ResidualAddEpilogue<bf16_t>{residual, N}, M, N, K, s);
}

bool fp8_skinny_peer_sum_supported(int N) { return peer_sum_shape_fits(N, kThreads); }

cudaError_t fp8_skinny_gemm_peer_sum(const bf16_t* x, const Fp8Scaled& w, bf16_t* y, float* residual,
                                     const bf16_t* norm_w, float eps, bf16_t* out, int N, int K, const PeerSum& ps,
                                     cudaStream_t s) {
  if (!fp8_skinny_peer_sum_supported(N) || !peer_sum_fits(ps, N, sizeof(bf16_t))) return cudaErrorInvalidValue;
  return launch_fp8(x, w, PeerSumEpilogue<bf16_t>{y, ps, residual, norm_w, eps, out, N}, 1, N, K, s);
}

cudaError_t fp8_skinny_gemm_gated(GatedActivation act, const GemvInput<bf16_t>& x, const Fp8Scaled& w, bf16_t* out,
                                  int M, int I, int K, cudaStream_t s) {
  if (act == GatedActivation::GeluTanh)
    return launch_fp8(x, w, GatedEpilogue<bf16_t, GatedActivation::GeluTanh>{out, I, true}, M, I, K, s);
  return launch_fp8(x, w, GatedEpilogue<bf16_t, GatedActivation::Silu>{out, I, true}, M, I, K, s);
}

cudaError_t fp8_skinny_gemm_qkv_rope(const GemvInput<bf16_t>& x, const Fp8Scaled& w, const bf16_t* bias,
                                     const int32_t* positions, const float* inv_freq, bf16_t* q, bf16_t* k, bf16_t* v,
                                     int M, int hq, int hkv, int D, int K, int long_from, cudaStream_t s,
                                     const QkNorm<bf16_t>& qk) {
  return with_fp8_rows(x, w, K, [&](const auto& rows) {
    return launch_qkv_rope(x, rows, bias, positions, inv_freq, q, k, v, M, hq, hkv, D, K, long_from, qk, s);
  });
}

}  // namespace gs::cuda
