// The grouped tensor-core GEMMs of moe_experts (moe_kernels.h); items of kTiledPairs pairs
// run on the tiled GEMM (moe_tiled_gemm.cuh), every other item here. A CTA computes one work item (an
// expert and up to MT of its pairs, moe_index.cuh) against G tiles of 16 of that expert's weight
// rows: the skinny GEMM's scheme (skinny_gemm.cu) with the weight rows offset to the item's expert
// and x's rows gathered through the item's pairs. A warp owns a tile of 16 rows (the gate and up
// rows of 8 outputs, or 16 down rows) and one of KS contiguous shares of K; weights stream from
// global memory into registers, 16 bytes a lane, and each lane's 8 consecutive k fill its A
// fragment slots of two k16 MMAs, with x's B fragments read in the same k order. Partials meet in
// shared memory, summed over the shares in a fixed order, so a pair's output depends neither on
// the other pairs nor on the item it falls in. K need only be a multiple of 8: the last 32-k
// granule is read where it exists and zero elsewhere.
// FP8 experts (e4m3 rows with f32 scales, MoeWeight): each 16-byte load holds 16 k, widened to
// bf16 in registers exactly (e4m3.cuh) and fed to the same MMAs, so a granule is 64 k and a step
// one 128-k block; each granule's products are summed apart and added to the accumulators times
// their rows' scales for that block (a whole-row scale is block 0), in f32: the dequantized
// weight's arithmetic without a dequantized copy. K must be a multiple of 128.
#include <algorithm>
#include <cmath>

#include "core/cuda/cuda_device.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/moe_index.cuh"
#include "ops/cuda/moe_kernels.h"
#include "ops/cuda/moe_tiled_gemm.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kCtasPerSm = 2;       // CTAs an SM for items of up to kStageMinPairs pairs
constexpr int kMinSteps = 8;        // steps of K a warp keeps (items of 8 pairs; more pairs, more)
constexpr int kStageMinPairs = 32;  // items of this many pairs stage x in shared memory
// FP8 experts' largest item: larger ones (one CTA an SM, x staged) are slower than reading an
// expert's rows once for each item of 32 (docs/PERF.md, FP8 experts).
constexpr int kFp8MaxChunk = 32;

// The experts' weight rows as the kernel streams them, 16 bytes a lane a load: bf16 (8 k a load),
// or e4m3 (16 k) with scales.
struct Bf16Rows {
  static constexpr int kChunk = 8;
  static constexpr bool kFp8 = false;
};
struct E4m3Rows {
  static constexpr int kChunk = 16;
  static constexpr bool kFp8 = true;
};
template <typename W>
constexpr int kGran = 4 * W::kChunk;  // k a granule: 4 lanes x a load
// Granules a step: bf16 4 (128 k); FP8 2, one 128-k block: a K share (whole blocks) is then
// whole steps, all of them pipelined, and a step's x fragments (twice bf16's per granule) do not
// spill at two CTAs an SM.
template <typename W>
constexpr int kUnits = W::kFp8 ? 2 : 4;
// A K share's boundaries fall on multiples of this (FP8: of the scales' 128-k blocks, so that a
// share is whole steps).
template <typename W>
constexpr int kAlign = W::kFp8 ? 128 : kGran<W>;
// A staged x row: one step's k, padded so that the 8 rows of a quarter-warp's loads fall in
// distinct banks.
template <typename W>
constexpr int kXsRow = kGran<W>* kUnits<W> + 16;

// Shared memory of the kernel: the partials of the epilogue, and (staged) the two x buffers of
// the main loop, which the epilogue reuses.
template <typename W, int MT>
constexpr size_t moe_mma_smem() {
  const size_t part = size_t(kWarps) * 16 * (MT + 4) * sizeof(float);
  const size_t xs = MT >= kStageMinPairs ? size_t(2) * MT * kXsRow<W> * 2 : 0;
  return part > xs ? part : xs;
}

// act[pair, n] = act(gate_e[n] . x[pair / k] + bg) * (up_e[n] . x[pair / k] + bu), with expert e's
// biases bg, bu (gpt-oss; null: none) and gpt-oss's clamped SwiGLU as the act.
template <GatedActivation A>
struct GateUpOut {
  static constexpr int R = 2;
  static constexpr bool kFold = false;
  bf16_t* act;
  int I;
  const float* bias;  // [E, 2I]
  float limit;
  int* counters;  // the small-batch path: the down GEMM's, zeroed here (or null)
  __device__ void prologue() const {
    if (counters && blockIdx.x == 0 && blockIdx.y == 0)
      for (int i = int(threadIdx.x); i < kMoeFoldCounters; i += int(blockDim.x)) counters[i] = 0;
  }
  __device__ int64_t row(int n, int r) const { return int64_t(r) * I + n; }
  __device__ void store(int e, int pair, int n, const float (&v)[R]) const {
    const float* b = bias ? bias + int64_t(e) * 2 * I + n : nullptr;
    act[int64_t(pair) * I + n] = from_f<bf16_t>(expert_act<A>(v[0], v[1], b, I, limit));
  }
};

// pair_out[pair, n] = weight[pair] * (down_e[n] . act[pair] + bias_e[n]); on the small-batch
// path (counters set) the last CTA of a column tile then sums each token's k pairs (fold).
struct DownOut {
  static constexpr int R = 1;
  static constexpr bool kFold = true;
  float* pair_out;
  const float* weights;
  int H;
  const float* bias;  // [E, H] or null
  int* counters;      // null: moe_reduce sums the pairs
  const bf16_t* shared;
  const float* shared_gate;
  int gate_stride;
  bf16_t* out;
  int k;
  // The small-batch path's routing where pairs of another rank's expert (< 0) add nothing
  // (expert parallelism), else null.
  const int32_t* other_rank_ids;
  MoeNormHandoff handoff;  // residual null: the sums go to out
  __device__ void prologue() const {}
  // out[t, o] for outputs [o0, o1) of every token: its pairs' rows in slot order, then the gated
  // shared expert (moe_reduce's arithmetic); with the handoff, that sum rounded to bf16 is added
  // into the residual instead (add_rms_norm's add), and xn = residual * norm_w rounded is stored
  // (one token: pre is fold_prefetch's residual and norm weight of this thread's output).
  // pair_out of other CTAs is read through L2, every pair's row whatever its id, so that the k
  // loads are in flight together.
  __device__ void fold(int o0, int o1, int P, float2 pre) const {
    const int w = o1 - o0, T = P / k;
    for (int i = int(threadIdx.x); i < T * w; i += int(blockDim.x)) {
      const int64_t t = i / w;
      const int o = o0 + i % w;
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) {
        const float v = __ldcg(pair_out + (t * k + j) * H + o);
        acc += !other_rank_ids || other_rank_ids[t * k + j] >= 0 ? v : 0.0f;
      }
      if (shared) {
        const float f = shared_gate ? 1.0f / (1.0f + expf(-shared_gate[t * gate_stride])) : 1.0f;
        acc += f * to_f(shared[t * H + o]);
      }
      if (!handoff.residual) {
        out[t * H + o] = from_f<bf16_t>(acc);
        continue;
      }
      const float r = pre.x + to_f(from_f<bf16_t>(acc));
      handoff.residual[o] = r;
      handoff.xn[o] = from_f<bf16_t>(r * pre.y);
    }
  }
  // The handoff's residual and norm weight of the fold's output o0 + threadIdx.x (its one token; a
  // tile's outputs, 16 a warp, are fewer than a CTA's threads), loaded by every CTA before it
  // counts itself, so that the last one's fold does not wait for them.
  __device__ float2 fold_prefetch(int o0, int o1) const {
    const int o = o0 + int(threadIdx.x);
    if (!handoff.residual || o >= o1) return {};
    return make_float2(handoff.residual[o], to_f(handoff.norm_w[o]));
  }
  __device__ int64_t row(int n, int) const { return n; }
  __device__ void store(int e, int pair, int n, const float (&v)[R]) const {
    pair_out[int64_t(pair) * H + n] = weights[pair] * (v[0] + (bias ? bias[int64_t(e) * H + n] : 0.0f));
  }
};

// The small-batch path's reduce (Epi::kFold with counters): each CTA of the grid, once its
// outputs are stored, counts itself in its column tile's counter; the last of the tile folds the
// tile's outputs of every token. Every CTA must arrive, those with no pair to compute too.
template <typename Epi, int TileOuts>
__device__ __forceinline__ void arrive_and_fold(const Epi& epi, int n_out, int P) {
  if constexpr (Epi::kFold) {
    if (epi.counters) {
      __shared__ int last;
      const int o0 = int(blockIdx.x) * TileOuts, o1 = min(o0 + TileOuts, n_out);
      const float2 pre = epi.fold_prefetch(o0, o1);
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) last = atomicAdd(epi.counters + blockIdx.x, 1) == int(gridDim.y) - 1;
      __syncthreads();
      if (last) {
        __threadfence();
        epi.fold(o0, o1, P, pre);
      }
    }
  }
}

// 8 bf16 of x at p: through the read-only cache, or from shared memory (staged).
template <bool kShared>
__device__ __forceinline__ uint4 load_x8(const bf16_t* p) {
  if constexpr (kShared)
    return *reinterpret_cast<const uint4*>(p);
  else
    return __ldg(reinterpret_cast<const uint4*>(p));
}

// acc[nt] += rows (g, g + 8) . x rows of token tile nt over this lane's load of k at kl: wa, wb
// are the rows' 16 bytes (8 bf16, or 16 e4m3 times their rows' scales sa, sb).
template <int MT, typename W, bool kShared = false>
__device__ __forceinline__ void mma_chunk(const uint4& wa, const uint4& wb, float sa, float sb,
                                          const bf16_t* const (&xr)[MT / 8], int kl, float (&acc)[MT / 8][4]) {
  if constexpr (!W::kFp8) {
#pragma unroll
    for (int nt = 0; nt < MT / 8; ++nt) {
      const uint4 xv = load_x8<kShared>(xr[nt] + kl);
      mma_bf16(acc[nt], wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
      mma_bf16(acc[nt], wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
    }
  } else {
    uint32_t a[8], b[8];  // k pairs in order
    e4m3x16_to_bf16(wa, a);
    e4m3x16_to_bf16(wb, b);
#pragma unroll
    for (int nt = 0; nt < MT / 8; ++nt) {
      const uint4 x0 = load_x8<kShared>(xr[nt] + kl), x1 = load_x8<kShared>(xr[nt] + kl + 8);
      float c[4] = {};
      mma_bf16(c, a[0], b[0], a[1], b[1], x0.x, x0.y);
      mma_bf16(c, a[2], b[2], a[3], b[3], x0.z, x0.w);
      mma_bf16(c, a[4], b[4], a[5], b[5], x1.x, x1.y);
      mma_bf16(c, a[6], b[6], a[7], b[7], x1.z, x1.w);
      acc[nt][0] += c[0] * sa, acc[nt][1] += c[1] * sa, acc[nt][2] += c[2] * sb, acc[nt][3] += c[3] * sb;
    }
  }
}

// x's row of pair p: p / x_div (gate_up reads token p / k; down reads the pair's own act row).
// Items come from the index, or on the small-batch path (ids set) item y is pair y of expert
// ids[y].
// Items of at least kStageMinPairs pairs (KS = 1) copy each step's x rows into shared memory
// once for the CTA's 8 warps (cp.async, double-buffered beside the weights' register sets);
// smaller ones read x's B fragments straight from global memory through L1.
// The small-batch path's down GEMM (a folding epilogue with ids: moe_experts launches it right
// after its gate_up GEMM) reads its ids early: the routing wrote them two kernels back, and it
// had completed, its writes visible, before any gate_up CTA passed its pdl_wait() and so before
// gate_up could trigger this launch. So the item's expert is read from L2 and the first two
// steps' weights load before this kernel's pdl_wait(), overlapping gate_up's tail; everything
// gate_up writes is read after it.
template <int MT, int KS, typename W, typename Epi>
__global__ void __launch_bounds__(kThreads, MT <= kStageMinPairs ? kCtasPerSm : 1)
    moe_mma_kernel(const bf16_t* __restrict__ x, int x_div, MoeWeight wt, int64_t expert_rows, Epi epi,
                   const int32_t* __restrict__ index, const int32_t* __restrict__ ids, int P, int E, int n_out, int K) {
  constexpr bool kStage = MT >= kStageMinPairs;
  static_assert(!kStage || KS == 1, "staged x serves one K share");
  constexpr int R = Epi::R, OW = 16 / R, G = kWarps / KS, PS = MT + 4, kC = W::kChunk, kG = kGran<W>;
  constexpr int kU = kUnits<W>, kStep = kG * kU, kXs = kXsRow<W>;
  extern __shared__ float part[];  // [warp][16 rows][PS]
  __shared__ int stage[kMoeStageInts];
  __shared__ int pairs[MT];
  const bool early_ids = Epi::kFold && ids;
  if (!early_ids) pdl_wait(), epi.prologue();
  const MoeIndex ix(const_cast<int32_t*>(index), P, E);
  int e = 0, begin = 0, end = 0;
  if (ids) {  // the small-batch path: items of one pair (MT 8 only, launch's check)
    begin = int(blockIdx.y), end = begin + 1, e = min(__ldcg(ids + begin), E - 1);
    if constexpr (MT == 8) {  // compiled there alone: the larger tiles have no registers to spare
      if (e < 0) {            // another rank's expert (expert parallelism): nothing to compute or read
        if (early_ids) pdl_wait(), epi.prologue();
        pdl_trigger();
        arrive_and_fold<Epi, G * OW>(epi, n_out, P);
        return;
      }
    }
  } else if (!moe_block_item(ix, E, MT, stage, e, begin, end)) {
    return;
  }
  const int n = end - begin;

  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int gi = warp / KS, si = warp % KS, n0 = (int(blockIdx.x) * G + gi) * OW;
  const auto weight_row = [&](int i) {  // tile row i: output n0 + i % OW, part i / OW
    const int o = n0 + i % OW;
    return int64_t(e) * expert_rows + epi.row(o < n_out ? o : 0, i / OW);
  };
  const int64_t ra = weight_row(g), rb = weight_row(g + 8);
  const auto* w8 = static_cast<const uint8_t*>(wt.data);
  const int row_bytes = K * (W::kFp8 ? 1 : 2);
  const uint4* wa_row = reinterpret_cast<const uint4*>(w8 + ra * row_bytes);
  const uint4* wb_row = reinterpret_cast<const uint4*>(w8 + rb * row_bytes);
  // The rows' scales: one a row (groups 1) or one a 128-k block.
  const float* sa_row = W::kFp8 ? wt.scales + ra * wt.groups : nullptr;
  const float* sb_row = W::kFp8 ? wt.scales + rb * wt.groups : nullptr;
  const int block_shift = wt.groups > 1 ? 7 : 30;  // k >> block_shift: the scale's block
  // This warp's share [k0, k1) of K; the whole granules end at kf.
  constexpr int kA = kAlign<W>;
  static_assert(!W::kFp8 || kStep == kA, "an FP8 step is one scale block");
  const int nc = (K + kA - 1) / kA, k0 = si * nc / KS * kA, k1 = min(K, (si + 1) * nc / KS * kA);
  const int kf = min(k1, K / kG * kG);
  int k = k0;
  float acc[MT / 8][4] = {};
  struct Regs {
    uint4 a[kU], b[kU];
    float sa, sb;  // FP8: the rows' scales of the step's block
  } r0, r1;
  const auto load = [&](Regs& r, int kb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      r.a[u] = __ldcs(wa_row + kb / kC + t + 4 * u);
      r.b[u] = __ldcs(wb_row + kb / kC + t + 4 * u);
    }
    r.sa = W::kFp8 ? __ldg(sa_row + (kb >> block_shift)) : 1.0f;
    r.sb = W::kFp8 ? __ldg(sb_row + (kb >> block_shift)) : 1.0f;
  };
  // The first step's weights load while the item's pairs are read (x's rows depend on them);
  // with early_ids the second step's too, both before the wait.
  bool preloaded = early_ids && k + 2 * kStep <= kf;
  if (k + kStep <= kf) load(r0, k);
  if (preloaded) load(r1, k + kStep);
  if (early_ids) pdl_wait(), epi.prologue();
  pdl_trigger();  // after the wait: the down GEMM after gate_up reads its ids before its own (launch.cuh)
  for (int i = int(threadIdx.x); i < MT; i += kThreads) pairs[i] = ids ? begin : ix.sorted[begin + min(i, n - 1)];
  __syncthreads();
  const bf16_t* xr[MT / 8];
#pragma unroll
  for (int nt = 0; nt < MT / 8; ++nt) xr[nt] = x + int64_t(pairs[nt * 8 + g] / x_div) * K;
  const auto step = [&](const Regs& r, int kb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) mma_chunk<MT, W>(r.a[u], r.b[u], r.sa, r.sb, xr, kb + kC * t + kG * u, acc);
  };
  bf16_t* const xs = reinterpret_cast<bf16_t*>(part);  // staged: [2][MT][kXs]
  const auto stage_x = [&](int buf, int kb) {
    for (int i = int(threadIdx.x); i < MT * (kStep / 8); i += kThreads) {
      const int r = i / (kStep / 8), c = i % (kStep / 8) * 8;
      cp_async16(xs + (buf * MT + r) * kXs + c, x + int64_t(pairs[r] / x_div) * K + kb + c);
    }
    cp_async_commit();
  };
  const auto step_staged = [&](const Regs& r, int buf) {
    const bf16_t* xsr[MT / 8];
#pragma unroll
    for (int nt = 0; nt < MT / 8; ++nt) xsr[nt] = xs + (buf * MT + nt * 8 + g) * kXs;
#pragma unroll
    for (int u = 0; u < kU; ++u) mma_chunk<MT, W, true>(r.a[u], r.b[u], r.sa, r.sb, xsr, kC * t + kG * u, acc);
  };
  int buf = 0;
  if (kStage && k + kStep <= kf) stage_x(0, k);
  // One step: the next step's weights (and staged x) load while this one multiplies; false
  // after the last full step.
  const auto half = [&](const Regs& r, Regs& next) {
    const bool more = k + 2 * kStep <= kf;
    if (more && !preloaded) load(next, k + kStep);
    preloaded = false;
    if constexpr (kStage) {
      if (more) {
        stage_x(buf ^ 1, k + kStep);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      step_staged(r, buf);
      __syncthreads();  // buf is staged again two steps on
      buf ^= 1;
    } else {
      step(r, k);
    }
    k += kStep;
    return more;
  };
  // r0 holds step k on entry; the halves alternate the two register sets.
  while (k + kStep <= kf) {
    if (!half(r0, r1)) break;
    if (!half(r1, r0)) break;
  }
  const auto scale_at = [&](const float* row, int kb) { return W::kFp8 ? __ldg(row + (kb >> block_shift)) : 1.0f; };
  for (; k < kf; k += kG)
    mma_chunk<MT, W>(__ldcs(wa_row + k / kC + t), __ldcs(wb_row + k / kC + t), scale_at(sa_row, k), scale_at(sb_row, k),
                     xr, k + kC * t, acc);
  if constexpr (!W::kFp8) {  // FP8: K is a multiple of the granule
    if (k < k1) {            // the partial last granule: lanes past K multiply zero weights with x's first k
      const bool in = k + kC * t < K;
      const uint4 z = make_uint4(0, 0, 0, 0);
      mma_chunk<MT, W>(in ? __ldcs(wa_row + k / kC + t) : z, in ? __ldcs(wb_row + k / kC + t) : z, 1.0f, 1.0f, xr,
                       in ? k + kC * t : 0, acc);
    }
  }

  store_tile_partials<MT>(part + warp * 16 * PS, PS, g, t, acc);
  __syncthreads();
  // Outputs (pair m, tile tg, output j), consecutive threads on consecutive outputs.
  for (int it = int(threadIdx.x); it < n * G * OW; it += kThreads) {
    const int m = it / (G * OW), q = it % (G * OW), tg = q / OW, j = q % OW;
    const int o = (int(blockIdx.x) * G + tg) * OW + j;
    if (o >= n_out) continue;
    float v[R];
    sum_tile_partials<R, KS, OW>(part, PS, tg, j, m, v);
    epi.store(e, pairs[m], o, v);
  }
  arrive_and_fold<Epi, G * OW>(epi, n_out, P);
}

// K shares a tile (a power of two up to 8 and K's granules): the most whose CTAs, over the items
// the routing can make active, still fit one wave (kCtasPerSm an SM), since a CTA's start (its
// PDL wait, the routing's reads, its first loads) is paid again by each wave; where even one
// share needs more waves, the most that leave a warp kMinSteps bf16 steps' bytes of K (128 k of
// bf16, 256 of e4m3) for every 8 pairs of an item, since more, shorter CTAs even out the last wave
// but each adds its partial sums.
template <typename W, int MT>
int pick_split(int tiles, int items, int K) {
  const int min_k = kMinSteps * MT / 8 * 128 * (W::kFp8 ? 2 : 1);
  const int slots = kCtasPerSm * cuda_current_sm_count(132), granules = (K + kAlign<W> - 1) / kAlign<W>;
  const auto ctas = [&](int ks) { return (tiles + kWarps / ks - 1) / (kWarps / ks) * items; };
  const bool one_wave = ctas(1) <= slots;
  int best = 1;
  for (int ks = 2; ks <= kWarps && ks <= granules; ks *= 2) {
    if (one_wave ? ctas(ks) > slots : K / ks < min_k) break;
    best = ks;
  }
  return best;
}

// One GEMM's operands past the tile and item choice.
template <typename Epi>
struct Gemm {
  const bf16_t* x;
  int x_div;
  MoeWeight w;
  int64_t expert_rows;
  Epi epi;
  const int32_t* index;
  const int32_t* ids;
  int P, E, n_out, K;
};

template <int MT, int KS, typename W, typename Epi>
cudaError_t launch_ks(const Gemm<Epi>& a, int tiles, cudaStream_t s) {
  auto* kernel = moe_mma_kernel<MT, KS, W, Epi>;
  const size_t smem = moe_mma_smem<W, MT>();
  static const cudaError_t attr =  // once an instantiation: with the static stage and pairs arrays, past 48 KB
      smem > 40 * 1024 ? cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem))
                       : cudaSuccess;
  if (attr != cudaSuccess) return attr;
  constexpr int G = kWarps / KS;
  const dim3 grid((tiles + G - 1) / G, a.ids ? a.P : moe_max_items(a.P, a.E, MT));
  return launch_pdl(kernel, grid, kThreads, smem, s, a.x, a.x_div, a.w, a.expert_rows, a.epi, a.index, a.ids, a.P, a.E,
                    a.n_out, a.K);
}

template <int MT, typename W, typename Epi>
cudaError_t launch_mt(const Gemm<Epi>& a, cudaStream_t s) {
  const int tiles = (a.n_out + 16 / Epi::R - 1) / (16 / Epi::R);
  if constexpr (MT >= kStageMinPairs) {
    return launch_ks<MT, 1, W>(a, tiles, s);
  } else {
    switch (pick_split<W, MT>(tiles, std::min(a.E, a.P), a.K)) {
      case 8: return launch_ks<MT, 8, W>(a, tiles, s);
      case 4: return launch_ks<MT, 4, W>(a, tiles, s);
      case 2: return launch_ks<MT, 2, W>(a, tiles, s);
      default: return launch_ks<MT, 1, W>(a, tiles, s);
    }
  }
}

template <typename W, typename Epi>
cudaError_t launch_w(int chunk, const Gemm<Epi>& a, cudaStream_t s) {
  switch (chunk) {
    case 8: return launch_mt<8, W>(a, s);
    case 16: return launch_mt<16, W>(a, s);
    case 32: return launch_mt<32, W>(a, s);
    default:
      if constexpr (!W::kFp8) {
        if (chunk == 64) return launch_mt<64, W>(a, s);
      }
      return cudaErrorInvalidValue;
  }
}

template <typename Epi>
cudaError_t launch(int chunk, const Gemm<Epi>& a, cudaStream_t s) {
  if (a.K <= 0 || a.K % (a.w.scales ? 128 : 8) != 0) return cudaErrorInvalidValue;
  if (a.ids && chunk != 8) return cudaErrorInvalidValue;  // items of one pair
  if (chunk == kTiledPairs && !a.ids)
    return launch_moe_tiled(a.x, a.x_div, a.w, a.expert_rows, a.epi, a.index, a.P, a.E, a.n_out, a.K, s);
  return a.w.scales ? launch_w<E4m3Rows>(chunk, a, s) : launch_w<Bf16Rows>(chunk, a, s);
}

}  // namespace

int moe_mma_chunk(int P, int E, bool fp8, bool block_scales) {
  const int active = std::max(1, std::min(E, P)), per = (P + active - 1) / active;
  const int most = block_scales ? kFp8MaxChunk : kMoeMaxChunk;
  int chunk = 8;
  while (chunk < 2 * per && chunk < most) chunk *= 2;
  // e4m3 items stop at kFp8MaxChunk on the register kernel; items of kTiledPairs run tiled.
  return fp8 && chunk > kFp8MaxChunk && chunk < kTiledPairs ? kFp8MaxChunk : chunk;
}

cudaError_t moe_gate_up_mma(GatedActivation act, const bf16_t* x, const MoeWeight& gate_up, const int32_t* index,
                            bf16_t* act_out, int P, int k, int E, int I, int H, int chunk, const MoeEpilogue& epi,
                            cudaStream_t s, const MoeDirect* direct) {
  const int32_t* ids = direct ? direct->ids : nullptr;
  int* const counters = direct ? direct->counters : nullptr;
  const auto run = [&](auto out) {
    return launch(chunk, Gemm<decltype(out)>{x, k, gate_up, 2 * int64_t(I), out, index, ids, P, E, I, H}, s);
  };
  const float* b = epi.gate_up_bias;
  const float lim = epi.swiglu_limit;
  switch (act) {
    case GatedActivation::GeluTanh: return run(GateUpOut<GatedActivation::GeluTanh>{act_out, I, b, lim, counters});
    case GatedActivation::ClampedSwiglu:
      return run(GateUpOut<GatedActivation::ClampedSwiglu>{act_out, I, b, lim, counters});
    default: return run(GateUpOut<GatedActivation::Silu>{act_out, I, b, lim, counters});
  }
}

cudaError_t moe_down_mma(const bf16_t* act, const MoeWeight& down, const float* weights, const int32_t* index,
                         float* pair_out, int P, int E, int I, int H, int chunk, const MoeEpilogue& epi, cudaStream_t s,
                         const MoeDirect* direct) {
  const MoeDirect d = direct ? *direct : MoeDirect{};
  const int32_t* other_rank_ids = d.other_ranks ? d.ids : nullptr;
  const DownOut out{pair_out,      weights,       H,     epi.down_bias, d.counters,     d.shared,
                    d.shared_gate, d.gate_stride, d.out, d.k,           other_rank_ids, d.handoff};
  return launch(chunk, Gemm<DownOut>{act, 1, down, int64_t(H), out, index, d.ids, P, E, H, I}, s);
}

}  // namespace gs::cuda
