// The grouped tensor-core GEMMs of moe_experts (moe_kernels.h). A CTA computes one work item (an
// expert and up to MT of its pairs, moe_index.cuh) against G tiles of 16 of that expert's weight
// rows: the skinny GEMM's scheme (skinny_gemm.cu) with the weight rows offset to the item's expert
// and x's rows gathered through the item's pairs. A warp owns a tile of 16 rows (the gate and up
// rows of 8 outputs, or 16 down rows) and one of KS contiguous shares of K; weights stream from
// global memory into registers, 16 bytes a lane, and each lane's 8 consecutive k fill its A
// fragment slots of two k16 MMAs, with x's B fragments read in the same k order. Partials meet in
// shared memory, summed over the shares in a fixed order, so a pair's output depends neither on
// the other pairs nor on the item it falls in. K need only be a multiple of 8: the last 32-k
// granule is read where it exists and zero elsewhere.
#include <algorithm>
#include <cmath>

#include "core/cuda/cuda_device.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/moe_index.cuh"
#include "ops/cuda/moe_kernels.h"
#include "ops/cuda/tensor_core.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kGran = 32;                // k a granule: 4 lanes x 8
constexpr int kU = 4;                    // granules a step
constexpr int kCtasPerSm = 2;            // CTAs an SM for items of up to kStageMinPairs pairs
constexpr int kMinSteps = 8;             // steps of K a warp keeps (items of 8 pairs; more pairs, more)
constexpr int kStageMinPairs = 32;       // items of this many pairs stage x in shared memory
constexpr int kXsRow = kGran * kU + 16;  // a staged x row: one step's k, padded so that the 8 rows
                                         // of a quarter-warp's loads fall in distinct banks

// Shared memory of the kernel: the partials of the epilogue, and (staged) the two x buffers of
// the main loop, which the epilogue reuses.
constexpr size_t moe_mma_smem(int MT) {
  const size_t part = size_t(kWarps) * 16 * (MT + 4) * sizeof(float);
  const size_t xs = MT >= kStageMinPairs ? size_t(2) * MT * kXsRow * 2 : 0;
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
  __device__ void fold(int, int, int) const {}
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
  __device__ void prologue() const {}
  // out[t, o] for outputs [o0, o1) of every token: its pairs' rows in slot order, then the gated
  // shared expert (moe_reduce's arithmetic). pair_out of other CTAs is read through L2.
  __device__ void fold(int o0, int o1, int P) const {
    const int w = o1 - o0, T = P / k;
    for (int i = int(threadIdx.x); i < T * w; i += int(blockDim.x)) {
      const int64_t t = i / w;
      const int o = o0 + i % w;
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) acc += __ldcg(pair_out + (t * k + j) * H + o);
      if (shared) {
        const float f = shared_gate ? 1.0f / (1.0f + expf(-shared_gate[t * gate_stride])) : 1.0f;
        acc += f * to_f(shared[t * H + o]);
      }
      out[t * H + o] = from_f<bf16_t>(acc);
    }
  }
  __device__ int64_t row(int n, int) const { return n; }
  __device__ void store(int e, int pair, int n, const float (&v)[R]) const {
    pair_out[int64_t(pair) * H + n] = weights[pair] * (v[0] + (bias ? bias[int64_t(e) * H + n] : 0.0f));
  }
};

// acc[nt] += rows (g, g + 8) . x rows of token tile nt over this lane's 8 k at kl.
template <int MT>
__device__ __forceinline__ void mma_step(const uint4& wa, const uint4& wb, const bf16_t* const (&xr)[MT / 8], int kl,
                                         float (&acc)[MT / 8][4]) {
#pragma unroll
  for (int nt = 0; nt < MT / 8; ++nt) {
    const uint4 xv = __ldg(reinterpret_cast<const uint4*>(xr[nt] + kl));
    mma_bf16(acc[nt], wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
    mma_bf16(acc[nt], wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
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
template <int MT, int KS, typename Epi>
__global__ void __launch_bounds__(kThreads, MT <= kStageMinPairs ? kCtasPerSm : 1)
    moe_mma_kernel(const bf16_t* __restrict__ x, int x_div, const bf16_t* __restrict__ w, int64_t expert_rows, Epi epi,
                   const int32_t* __restrict__ index, const int32_t* __restrict__ ids, int P, int E, int n_out, int K) {
  constexpr bool kStage = MT >= kStageMinPairs;
  static_assert(!kStage || KS == 1, "staged x serves one K share");
  constexpr int R = Epi::R, OW = 16 / R, G = kWarps / KS, PS = MT + 4, kStep = kGran * kU;
  extern __shared__ float part[];  // [warp][16 rows][PS]
  __shared__ int stage[kMoeStageInts];
  __shared__ int pairs[MT];
  const bool early_ids = Epi::kFold && ids;
  if (!early_ids) pdl_wait(), epi.prologue();
  const MoeIndex ix(const_cast<int32_t*>(index), P, E);
  int e = 0, begin = 0, end = 0;
  if (ids) {
    begin = int(blockIdx.y), end = begin + 1, e = min(max(__ldcg(ids + begin), 0), E - 1);
  } else if (!moe_block_item(ix, E, MT, stage, e, begin, end)) {
    return;
  }
  const int n = end - begin;

  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int gi = warp / KS, si = warp % KS, n0 = (int(blockIdx.x) * G + gi) * OW;
  const bf16_t* we = w + int64_t(e) * expert_rows * K;
  const auto row_ptr = [&](int i) {  // tile row i: output n0 + i % OW, part i / OW
    const int o = n0 + i % OW;
    return reinterpret_cast<const uint4*>(we + epi.row(o < n_out ? o : 0, i / OW) * K);
  };
  const uint4* wa_row = row_ptr(g);
  const uint4* wb_row = row_ptr(g + 8);
  // This warp's share [k0, k1) of K's granules; the whole granules end at kf.
  const int nc = (K + kGran - 1) / kGran, k0 = si * nc / KS * kGran, k1 = (si + 1) * nc / KS * kGran;
  const int kf = min(k1, K / kGran * kGran);
  int k = k0;
  float acc[MT / 8][4] = {};
  uint4 wa[kU], wb[kU], wa2[kU], wb2[kU];
  const auto load = [&](uint4(&a)[kU], uint4(&b)[kU], int kb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      a[u] = __ldcs(wa_row + kb / 8 + t + 4 * u);
      b[u] = __ldcs(wb_row + kb / 8 + t + 4 * u);
    }
  };
  // The first step's weights load while the item's pairs are read (x's rows depend on them);
  // with early_ids the second step's too, both before the wait.
  bool preloaded = early_ids && k + 2 * kStep <= kf;
  if (k + kStep <= kf) load(wa, wb, k);
  if (preloaded) load(wa2, wb2, k + kStep);
  if (early_ids) pdl_wait(), epi.prologue();
  pdl_trigger();
  for (int i = int(threadIdx.x); i < MT; i += kThreads) pairs[i] = ids ? begin : ix.sorted[begin + min(i, n - 1)];
  __syncthreads();
  const bf16_t* xr[MT / 8];
#pragma unroll
  for (int nt = 0; nt < MT / 8; ++nt) xr[nt] = x + int64_t(pairs[nt * 8 + g] / x_div) * K;
  const auto step = [&](const uint4(&a)[kU], const uint4(&b)[kU], int kb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) mma_step<MT>(a[u], b[u], xr, kb + 8 * t + kGran * u, acc);
  };
  bf16_t* const xs = reinterpret_cast<bf16_t*>(part);  // staged: [2][MT][kXsRow]
  const auto stage_x = [&](int buf, int kb) {
    for (int i = int(threadIdx.x); i < MT * (kStep / 8); i += kThreads) {
      const int r = i / (kStep / 8), c = i % (kStep / 8) * 8;
      cp_async16(xs + (buf * MT + r) * kXsRow + c, x + int64_t(pairs[r] / x_div) * K + kb + c);
    }
    cp_async_commit();
  };
  const auto step_staged = [&](const uint4(&a)[kU], const uint4(&b)[kU], int buf) {
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int nt = 0; nt < MT / 8; ++nt) {
        const uint4 xv = *reinterpret_cast<const uint4*>(xs + (buf * MT + nt * 8 + g) * kXsRow + 8 * t + kGran * u);
        mma_bf16(acc[nt], a[u].x, b[u].x, a[u].y, b[u].y, xv.x, xv.y);
        mma_bf16(acc[nt], a[u].z, b[u].z, a[u].w, b[u].w, xv.z, xv.w);
      }
  };
  int buf = 0;
  if (kStage && k + kStep <= kf) stage_x(0, k);
  // One step: the next step's weights (and staged x) load while this one multiplies; false
  // after the last full step.
  const auto half = [&](const uint4(&a)[kU], const uint4(&b)[kU], uint4(&na)[kU], uint4(&nb)[kU]) {
    const bool more = k + 2 * kStep <= kf;
    if (more && !preloaded) load(na, nb, k + kStep);
    preloaded = false;
    if constexpr (kStage) {
      if (more) {
        stage_x(buf ^ 1, k + kStep);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      step_staged(a, b, buf);
      __syncthreads();  // buf is staged again two steps on
      buf ^= 1;
    } else {
      step(a, b, k);
    }
    k += kStep;
    return more;
  };
  // wa / wb hold step k on entry; the halves alternate the two register sets.
  while (k + kStep <= kf) {
    if (!half(wa, wb, wa2, wb2)) break;
    if (!half(wa2, wb2, wa, wb)) break;
  }
  for (; k < kf; k += kGran) mma_step<MT>(__ldcs(wa_row + k / 8 + t), __ldcs(wb_row + k / 8 + t), xr, k + 8 * t, acc);
  if (k < k1) {  // the partial last granule: lanes past K multiply zero weights with x's first k
    const bool in = k + 8 * t < K;
    const uint4 z = make_uint4(0, 0, 0, 0);
    mma_step<MT>(in ? __ldcs(wa_row + k / 8 + t) : z, in ? __ldcs(wb_row + k / 8 + t) : z, xr, in ? k + 8 * t : 0, acc);
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
  if constexpr (Epi::kFold) {
    if (epi.counters) {  // every CTA of the grid reaches here: the last of this column tile folds
      __shared__ int last;
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) last = atomicAdd(epi.counters + blockIdx.x, 1) == int(gridDim.y) - 1;
      __syncthreads();
      if (last) {
        __threadfence();
        const int o0 = int(blockIdx.x) * G * OW;
        epi.fold(o0, min(o0 + G * OW, n_out), P);
      }
    }
  }
}

// K shares a tile (a power of two up to 8 and K's granules): the most whose CTAs, over the items
// the routing can make active, still fit one wave (kCtasPerSm an SM), since a CTA's start (its
// PDL wait, the routing's reads, its first loads) is paid again by each wave; where even one
// share needs more waves, the most that leave a warp kMinSteps steps of K for every 8 pairs of
// an item, since more, shorter CTAs even out the last wave but each adds its partial sums.
int pick_split(int tiles, int items, int K, int MT) {
  const int min_steps = kMinSteps * MT / 8;
  const int slots = kCtasPerSm * cuda_current_sm_count(132), granules = (K + kGran - 1) / kGran;
  const auto ctas = [&](int ks) { return (tiles + kWarps / ks - 1) / (kWarps / ks) * items; };
  const bool one_wave = ctas(1) <= slots;
  int best = 1;
  for (int ks = 2; ks <= kWarps && ks <= granules; ks *= 2) {
    if (one_wave ? ctas(ks) > slots : granules / ks < min_steps * kU) break;
    best = ks;
  }
  return best;
}

template <int MT, int KS, typename Epi>
cudaError_t launch_ks(const bf16_t* x, int x_div, const bf16_t* w, int64_t expert_rows, const Epi& epi,
                      const int32_t* index, const int32_t* ids, int P, int E, int n_out, int K, int tiles,
                      cudaStream_t s) {
  auto* kernel = moe_mma_kernel<MT, KS, Epi>;
  const size_t smem = moe_mma_smem(MT);
  if (smem > 40 * 1024)  // with the static stage and pairs arrays, past the 48 KB default
    if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        err != cudaSuccess)
      return err;
  constexpr int G = kWarps / KS;
  const dim3 grid((tiles + G - 1) / G, ids ? P : moe_max_items(P, E, MT));
  return launch_pdl(kernel, grid, kThreads, smem, s, x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K);
}

template <int MT, typename Epi>
cudaError_t launch_mt(const bf16_t* x, int x_div, const bf16_t* w, int64_t expert_rows, const Epi& epi,
                      const int32_t* index, const int32_t* ids, int P, int E, int n_out, int K, cudaStream_t s) {
  const int tiles = (n_out + 16 / Epi::R - 1) / (16 / Epi::R);
  if constexpr (MT >= kStageMinPairs) {
    return launch_ks<MT, 1>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, tiles, s);
  } else {
    switch (pick_split(tiles, std::min(E, P), K, MT)) {
      case 8: return launch_ks<MT, 8>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, tiles, s);
      case 4: return launch_ks<MT, 4>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, tiles, s);
      case 2: return launch_ks<MT, 2>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, tiles, s);
      default: return launch_ks<MT, 1>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, tiles, s);
    }
  }
}

template <typename Epi>
cudaError_t launch(int chunk, const bf16_t* x, int x_div, const bf16_t* w, int64_t expert_rows, const Epi& epi,
                   const int32_t* index, const int32_t* ids, int P, int E, int n_out, int K, cudaStream_t s) {
  if (K <= 0 || K % 8 != 0) return cudaErrorInvalidValue;
  if (ids && chunk != 8) return cudaErrorInvalidValue;  // items of one pair
  switch (chunk) {
    case 8: return launch_mt<8>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, s);
    case 16: return launch_mt<16>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, s);
    case 32: return launch_mt<32>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, s);
    case 64: return launch_mt<64>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, s);
    case 128: return launch_mt<128>(x, x_div, w, expert_rows, epi, index, ids, P, E, n_out, K, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int moe_mma_chunk(int P, int E) {
  const int active = std::max(1, std::min(E, P)), per = (P + active - 1) / active;
  int chunk = 8;
  while (chunk < 2 * per && chunk < kMoeMaxChunk) chunk *= 2;
  return chunk;
}

cudaError_t moe_gate_up_mma(GatedActivation act, const bf16_t* x, const bf16_t* gate_up, const int32_t* index,
                            bf16_t* act_out, int P, int k, int E, int I, int H, int chunk, const MoeEpilogue& epi,
                            cudaStream_t s, const MoeDirect* direct) {
  const int32_t* ids = direct ? direct->ids : nullptr;
  int* const counters = direct ? direct->counters : nullptr;
  const auto run = [&](auto out) {
    return launch(chunk, x, k, gate_up, 2 * int64_t(I), out, index, ids, P, E, I, H, s);
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

cudaError_t moe_down_mma(const bf16_t* act, const bf16_t* down, const float* weights, const int32_t* index,
                         float* pair_out, int P, int E, int I, int H, int chunk, const MoeEpilogue& epi, cudaStream_t s,
                         const MoeDirect* direct) {
  const MoeDirect d = direct ? *direct : MoeDirect{};
  const DownOut out{pair_out,      weights, H,  epi.down_bias, d.counters, d.shared, d.shared_gate,
                    d.gate_stride, d.out,   d.k};
  return launch(chunk, act, 1, down, int64_t(H), out, index, d.ids, P, E, H, I, s);
}

}  // namespace gs::cuda
