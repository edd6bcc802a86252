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
// scale each, applied to the summed dot product before the epilogue. At one token on FP8 rows the
// input may be the RMS norm of the f32 residual (the deferred norm, ops/backend.h): each CTA
// stages x = residual * norm_w (bf16) in shared memory while summing the residual's squares, and
// scales the dot products by 1 / rms at the end (x . w = (r * g) . w / rms), as the bf16 GEMV's
// NormedRow does, so no norm kernel runs before the projection.
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
constexpr int kU = 4;            // 16-byte loads per row and lane in a step
constexpr int kWarpsPerSm = 16;  // warps in flight per SM the split aims at

// The weight rows of a tile: kK k a 16-byte load; where kScaled, scale(row) multiplies a row's
// summed dot products; where kNormed, x is the CTA's normed row in shared memory (stage_normed).
struct Bf16Rows {
  static constexpr bool kNormed = false;
  static constexpr int kK = 8;
  static constexpr bool kScaled = false;
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

// e4m3 rows with one f32 scale each (ops/fp8_weights.h, whole-row scales); kNormed: x is the
// CTA's normed row in shared memory (stage_normed).
template <bool kNormed_ = false>
struct Fp8Rows {
  static constexpr bool kNormed = kNormed_;
  static constexpr int kK = 16;
  static constexpr bool kScaled = true;
  const uint8_t* w;
  const float* scales;
  __device__ const uint4* row(int64_t r, int K) const { return reinterpret_cast<const uint4*>(w + r * K); }
  __device__ float scale(int64_t r) const { return __ldg(scales + r); }
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

// The next step's weights load while this step multiplies (two register sets).
template <int MT, int KS, typename W, typename Epi>
__global__ void __launch_bounds__(kThreads, MT <= 64 ? 2 : 1)  // 2 CTAs (16 warps) an SM up to 64 tokens
    skinny_kernel(GemvInput<bf16_t> in, W w, Epi epi, int M, int n_out, int K) {
  constexpr int R = Epi::R, OW = 16 / R, G = kWarps / KS, PS = MT + 4, KK = W::kK;
  extern __shared__ float part[];  // [warp][16 rows][PS]; normed: then red [kWarps], xs [K] bf16
  float* const red = part + kWarps * 16 * PS;
  bf16_t* const xs = reinterpret_cast<bf16_t*>(red + kWarps);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int gi = warp / KS, si = warp % KS, n0 = (int(blockIdx.x) * G + gi) * OW;
  // This lane's weight rows: tile rows g and g + 8 (row i = output j = i % OW, part r = i / OW).
  const auto row_ptr = [&](int i) {
    const int n = n0 + i % OW;
    return w.row(epi.row(n < n_out ? n : 0, i / OW), K);
  };
  const uint4* wa_row = row_ptr(g);
  const uint4* wb_row = row_ptr(g + 8);
  const bf16_t* xr[MT / 8];
#pragma unroll
  for (int nt = 0; nt < MT / 8; ++nt) xr[nt] = W::kNormed ? xs : in.x + int64_t(min(nt * 8 + g, M - 1)) * K;
  // This warp's share [k0, k1) of K (multiples of the granule); a step covers kStep at
  // k + KK t + 4 KK u.
  constexpr int kGran = kGranule<W>, kStep = kGran * kU;
  const int nc = K / kGran, k0 = si * nc / KS * kGran, k1 = (si + 1) * nc / KS * kGran;
  int k = k0;
  float acc[MT / 8][4] = {};
  uint4 wa[kU], wb[kU], wa2[kU], wb2[kU];
  const auto load = [&](uint4(&a)[kU], uint4(&b)[kU], int kb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      a[u] = __ldcs(wa_row + kb / KK + t + 4 * u);
      b[u] = __ldcs(wb_row + kb / KK + t + 4 * u);
    }
  };
  const auto step = [&](const uint4(&a)[kU], const uint4(&b)[kU], int kb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) w.template mma<MT>(a[u], b[u], xr, kb + KK * t + kGran * u, acc);
  };
  // The first step's weights (constant) before pdl_wait(): they overlap the previous kernel.
  const bool first = k + kStep <= k1;
  if (first) load(wa, wb, k);
  pdl_wait();
  float inv_rms = 1.0f;
  if constexpr (W::kNormed) inv_rms = stage_normed(in, K, xs, red);
  pdl_trigger();
  // wa / wb hold step k on entry; each half loads the other set's step before multiplying.
  while (k + kStep <= k1) {
    const bool more = k + 2 * kStep <= k1;
    if (more) load(wa2, wb2, k + kStep);
    step(wa, wb, k);
    k += kStep;
    if (!more) break;
    const bool more2 = k + 2 * kStep <= k1;
    if (more2) load(wa, wb, k + kStep);
    step(wa2, wb2, k);
    k += kStep;
    if (!more2) break;
  }
  for (; k < k1; k += kGran) {
    const uint4 a = __ldcs(wa_row + k / KK + t);
    const uint4 b = __ldcs(wb_row + k / KK + t);
    w.template mma<MT>(a, b, xr, k + KK * t, acc);
  }

  store_tile_partials<MT>(part + warp * 16 * PS, PS, g, t, acc);
  __syncthreads();
  // Outputs (token m, tile gi, output j), consecutive threads on consecutive n.
  for (int it = int(threadIdx.x); it < M * G * OW; it += kThreads) {
    const int m = it / (G * OW), q = it % (G * OW), tg = q / OW, j = q % OW;
    const int n = (int(blockIdx.x) * G + tg) * OW + j;
    if (n >= n_out) continue;
    float v[R];
    sum_tile_partials<R, KS, OW>(part, PS, tg, j, m, v);
    if constexpr (W::kScaled) {
#pragma unroll
      for (int r = 0; r < R; ++r) v[r] *= w.scale(epi.row(n, r)) * inv_rms;
    }
    epi.store(n, m, v);
  }
}

// K shares per tile: the power of two (<= 8, dividing K into granules) that brings the warp
// count closest to kWarpsPerSm per SM.
int pick_split(int tiles, int K, int granule) {
  const double target = double(cuda_current_sm_count(132)) * kWarpsPerSm;
  int best = 1;
  for (int ks = 2; ks <= kWarps; ks *= 2)
    if (K / granule >= ks && std::abs(std::log(tiles * ks / target)) < std::abs(std::log(tiles * best / target)))
      best = ks;
  return best;
}

template <int MT, int KS, typename W, typename Epi>
cudaError_t launch_ks(const GemvInput<bf16_t>& x, const W& w, const Epi& epi, int M, int n_out, int K, int tiles,
                      cudaStream_t s) {
  auto* kernel = skinny_kernel<MT, KS, W, Epi>;
  size_t smem = size_t(kWarps) * 16 * (MT + 4) * sizeof(float);
  if constexpr (W::kNormed) smem += kWarps * sizeof(float) + size_t(K) * sizeof(bf16_t);
  if (smem > 48 * 1024)
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
      return e;
  constexpr int G = kWarps / KS;
  return launch_pdl(kernel, (tiles + G - 1) / G, kThreads, smem, s, x, w, epi, M, n_out, K);
}

template <int MT, typename W, typename Epi>
cudaError_t launch_mt(const GemvInput<bf16_t>& x, const W& w, const Epi& epi, int M, int n_out, int K, cudaStream_t s) {
  const int tiles = (n_out + 16 / Epi::R - 1) / (16 / Epi::R);
  switch (pick_split(tiles, K, kGranule<W>)) {
    case 8: return launch_ks<MT, 8>(x, w, epi, M, n_out, K, tiles, s);
    case 4: return launch_ks<MT, 4>(x, w, epi, M, n_out, K, tiles, s);
    case 2: return launch_ks<MT, 2>(x, w, epi, M, n_out, K, tiles, s);
    default: return launch_ks<MT, 1>(x, w, epi, M, n_out, K, tiles, s);
  }
}

// The token tile for M: 16, 32, 64 or 128 (FP8 rows: 8 up to 8 tokens, one token included).
template <typename W, typename Epi>
cudaError_t launch(const GemvInput<bf16_t>& x, const W& w, const Epi& epi, int M, int n_out, int K, cudaStream_t s) {
  const int min_m = W::kScaled ? 1 : kSkinnyMinM;
  if (M < min_m || M > kSkinnyMaxM || K <= 0 || K % kGranule<W> != 0) return cudaErrorInvalidValue;
  if (n_out <= 0) return cudaGetLastError();
  if constexpr (W::kNormed) {  // one token (fp8_skinny_norm_supported)
    if (M != 1 || !x.residual) return cudaErrorInvalidValue;
    return launch_mt<8>(x, w, epi, M, n_out, K, s);
  } else {
    if (x.residual) return cudaErrorInvalidValue;
    if constexpr (W::kScaled) {
      if (M <= 8) return launch_mt<8>(x, w, epi, M, n_out, K, s);
    }
    if (M <= 16) return launch_mt<16>(x, w, epi, M, n_out, K, s);
    if (M <= 32) return launch_mt<32>(x, w, epi, M, n_out, K, s);
    if (M <= 64) return launch_mt<64>(x, w, epi, M, n_out, K, s);
    return launch_mt<128>(x, w, epi, M, n_out, K, s);
  }
}

// The normed row of K (bf16) the kernel stages: at most 64 KiB of shared memory.
constexpr int kNormedMaxK = 32768;

// FP8 rows: the normed form where the input is the residual's norm, else plain.
template <typename Epi>
cudaError_t launch_fp8(const GemvInput<bf16_t>& x, const uint8_t* w, const float* scales, const Epi& epi, int M,
                       int n_out, int K, cudaStream_t s) {
  if (x.residual) return launch(x, Fp8Rows<true>{w, scales}, epi, M, n_out, K, s);
  return launch(x, Fp8Rows<>{w, scales}, epi, M, n_out, K, s);
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

cudaError_t skinny_gemm_qkv_rope(const bf16_t* x, const bf16_t* w, const bf16_t* bias, const int32_t* positions,
                                 const float* inv_freq, bf16_t* q, bf16_t* k, bf16_t* v, int M, int hq, int hkv, int D,
                                 int K, int long_from, cudaStream_t s) {
  if (D % 2 != 0) return cudaErrorInvalidValue;
  const int half = D / 2;
  return launch(x, Bf16Rows{w},
                QkvRopeEpilogue<bf16_t>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from, true}, M,
                (hq + 2 * hkv) * half, K, s);
}

bool fp8_skinny_supported(int M, int K, const void* x, const void* w) {
  return M >= 1 && M <= kSkinnyMaxM && K > 0 && K % kGranule<Fp8Rows<>> == 0 && vec_aligned(x, w);
}

bool fp8_skinny_norm_supported(int M, int K, const float* residual, const bf16_t* norm_w, const void* w) {
  return M == 1 && K <= kNormedMaxK && fp8_skinny_supported(M, K, residual, w) && vec_aligned(norm_w);
}

cudaError_t fp8_skinny_gemm(const GemvInput<bf16_t>& x, const uint8_t* w, const float* scales, const bf16_t* bias,
                            void* y, bool y_f32, int M, int N, int K, cudaStream_t s) {
  return launch_fp8(x, w, scales, PlainEpilogue<bf16_t>{bias, y, y_f32, N}, M, N, K, s);
}

cudaError_t fp8_skinny_gemm_add_residual(const GemvInput<bf16_t>& x, const uint8_t* w, const float* scales,
                                         float* residual, int M, int N, int K, cudaStream_t s) {
  return launch_fp8(x, w, scales, ResidualAddEpilogue<bf16_t>{residual, N}, M, N, K, s);
}

cudaError_t fp8_skinny_gemm_gated(GatedActivation act, const GemvInput<bf16_t>& x, const uint8_t* w,
                                  const float* scales, bf16_t* out, int M, int I, int K, cudaStream_t s) {
  if (act == GatedActivation::GeluTanh)
    return launch_fp8(x, w, scales, GatedEpilogue<bf16_t, GatedActivation::GeluTanh>{out, I, true}, M, I, K, s);
  return launch_fp8(x, w, scales, GatedEpilogue<bf16_t, GatedActivation::Silu>{out, I, true}, M, I, K, s);
}

cudaError_t fp8_skinny_gemm_qkv_rope(const GemvInput<bf16_t>& x, const uint8_t* w, const float* scales,
                                     const bf16_t* bias, const int32_t* positions, const float* inv_freq, bf16_t* q,
                                     bf16_t* k, bf16_t* v, int M, int hq, int hkv, int D, int K, int long_from,
                                     cudaStream_t s) {
  if (D % 2 != 0) return cudaErrorInvalidValue;
  const int half = D / 2;
  return launch_fp8(x, w, scales,
                    QkvRopeEpilogue<bf16_t>{bias, positions, inv_freq, q, k, v, hq, hkv, half, long_from, true}, M,
                    (hq + 2 * hkv) * half, K, s);
}

}  // namespace gs::cuda
