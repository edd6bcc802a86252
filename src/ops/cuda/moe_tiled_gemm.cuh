// The grouped GEMM of moe_experts for items of kTiledPairs pairs (prefill and other batches where
// an expert gets many pairs; moe_grouped_gemm.cu picks it for bf16 experts and FP8 ones with a
// scale a row): a classic tiled tensor-core GEMM a CTA per (work item, tile of TiledShape::kRows
// weight rows), x's rows of the item's pairs and the expert's weight rows both streamed through a
// cp.async ring of 64-k tiles in shared memory (1024-byte aligned, in wgmma's 128-byte swizzle),
// two warpgroups of 64 pairs x all the tile's rows each on wgmma (m64n256k16 or m64n128k16, both
// operands from shared memory). Each weight tile is read once for the item's 128 pairs and each x
// tile once for the tile's rows, where the register-streaming kernel (moe_mma_kernel) reads a
// weight row per warp with one step in flight; that kernel keeps the smaller items.
// A tile row is weight row epi.row(o, part) of output o: for gate_up (R 2) each 16 rows are the
// gate rows of 8 outputs then their up rows, so a lane's accumulators of n-tiles 2j and 2j + 1
// are the gate and up of the same outputs and the epilogue applies the activation in registers.
// FP8 experts with a scale a row (MoeWeight groups 1: --quantization fp8) stream their e4m3 tiles
// through the ring instead (half the bytes); each thread widens the 16-byte chunks it copied,
// exactly, into a double-buffered bf16 tile once they land, so one barrier a k-tile still orders
// everything, and the row scales multiply the sums in the epilogue (block-scaled experts keep the
// register kernel, whose sums apply a scale a 128-k block).
// Included by moe_grouped_gemm.cu, whose epilogues (GateUpOut, DownOut) it instantiates.
#pragma once
#include <cstdint>

#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/moe_index.cuh"
#include "ops/cuda/moe_kernels.h"
#include "ops/cuda/tensor_core.cuh"
#include "ops/cuda/wgmma.cuh"

namespace gs::cuda {

constexpr int kTiledPairs = 128;  // an item's pairs: the tile's M
constexpr int kTiledK = 64;       // k a stage
constexpr int kTiledThreads = 256;

// The tile's N (weight rows a CTA), the ring's depth and how far ahead it loads. bf16: 256 rows
// (each x tile serves twice the weight rows of a 128-row tile, so less of L2's bandwidth goes to
// x), one CTA an SM, and one k-tile's wgmmas in flight across the next barrier: the stage
// refilled at kt was last read by kt - 2's, which every warpgroup waited for before kt's
// barrier. F8: each thread widens its e4m3 chunks into a bf16 tile before the barrier, into the
// tile kt - 2 read, so each k-tile's wgmmas complete within it; 128 rows keep two CTAs an SM, one
// widening while the other multiplies.
template <bool F8>
struct TiledShape {
  static constexpr int kRows = F8 ? 128 : 256, kStages = F8 ? 3 : 4, kCtasPerSm = F8 ? 2 : 1;
  static constexpr int kAhead = F8 ? kStages - 1 : kStages - 2;  // tiles loaded ahead of the one computed
  // x's stages, then the weights' (bf16), or their two widened tiles and e4m3 stages, and 1024
  // bytes to align the first to wgmma's swizzle.
  static constexpr size_t kSmem = size_t(kStages) * kTiledPairs * kTiledK * 2 +
                                  (F8 ? size_t(kStages) * kRows * kTiledK + size_t(2) * kRows * kTiledK * 2
                                      : size_t(kStages) * kRows * kTiledK * 2) +
                                  1024;
};

// x: [*, K] bf16, pair p reads row p / x_div; weights: expert e's rows from e * expert_rows, bf16
// or (F8) e4m3 with a scale a row.
template <typename Epi, bool F8>
__global__ void __launch_bounds__(kTiledThreads, TiledShape<F8>::kCtasPerSm)
    moe_tiled_kernel(const bf16_t* __restrict__ x, int x_div, const void* __restrict__ wv,
                     const float* __restrict__ scales, int64_t expert_rows, Epi epi, const int32_t* __restrict__ index,
                     int P, int E, int n_out, int K) {
  constexpr int R = Epi::R, OW = 16 / R, kChunks = kTiledK / 8;
  constexpr int kTiledRows = TiledShape<F8>::kRows, kTiledStages = TiledShape<F8>::kStages;
  constexpr int kAhead = TiledShape<F8>::kAhead;
  extern __shared__ __align__(128) uint16_t smem_raw[];
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  uint16_t* const smem = smem_raw + ((1024 - sa % 1024) % 1024) / 2;
  uint16_t* const xs = smem;                                         // [stage][pairs][64]
  uint16_t* const ws = smem + kTiledStages * kTiledPairs * kTiledK;  // [stage][rows][64], or F8's widened [2][rows][64]
  uint8_t* const w8s =
      reinterpret_cast<uint8_t*>(ws + (F8 ? 2 : kTiledStages) * kTiledRows * kTiledK);  // [stage][rows][64 B]
  const auto* w8 = static_cast<const uint8_t*>(wv);
  const auto* w = static_cast<const bf16_t*>(wv);
  __shared__ int stage[kMoeStageInts];
  __shared__ int pairs[kTiledPairs];
  pdl_wait();
  epi.prologue();
  pdl_trigger();
  const MoeIndex ix(const_cast<int32_t*>(index), P, E);
  int e = 0, begin = 0, end = 0;
  if (!moe_block_item(ix, E, kTiledPairs, stage, e, begin, end)) return;
  const int n = end - begin, o0 = int(blockIdx.x) * (kTiledRows / R);
  for (int i = int(threadIdx.x); i < kTiledPairs; i += kTiledThreads) pairs[i] = ix.sorted[begin + min(i, n - 1)];
  __syncthreads();

  // This thread's cp.async rows and chunk: 4 of x's rows a stage, one chunk each, and kWRows weight
  // rows (bf16: 8 of the 256, one chunk each; e4m3: 2 of the 128, one 16-k chunk each).
  constexpr int kRowsPerPass = kTiledThreads / kChunks;                                // 32
  constexpr int kW8Chunks = kTiledK / 16, kW8RowsPerPass = kTiledThreads / kW8Chunks;  // 4, 64
  constexpr int kWRows = F8 ? kTiledRows / kW8RowsPerPass : kTiledRows / kRowsPerPass;
  const int ch = int(threadIdx.x) % kChunks, r0 = int(threadIdx.x) / kChunks;
  const int wch = F8 ? int(threadIdx.x) % kW8Chunks : ch, wr0 = F8 ? int(threadIdx.x) / kW8Chunks : r0;
  const int w_pass = F8 ? kW8RowsPerPass : kRowsPerPass;
  const bf16_t* xrow[kTiledPairs / kRowsPerPass];
  int64_t wrow[kWRows];  // weight row indices
#pragma unroll
  for (int i = 0; i < kTiledPairs / kRowsPerPass; ++i) xrow[i] = x + int64_t(pairs[r0 + i * kRowsPerPass] / x_div) * K;
#pragma unroll
  for (int i = 0; i < kWRows; ++i) {
    const int r = wr0 + i * w_pass, o = o0 + r / 16 * OW + r % OW;
    wrow[i] = int64_t(e) * expert_rows + epi.row(o < n_out ? o : 0, r % 16 / OW);
  }
  const int k_tiles = (K + kTiledK - 1) / kTiledK;
  const auto load_stage = [&](int s, int kt) {
    const int kc = kt * kTiledK + ch * 8;
    const bool in = kc < K;  // K is a multiple of 8: a chunk is wholly in or out
#pragma unroll
    for (int i = 0; i < kTiledPairs / kRowsPerPass; ++i)
      cp_async16(xs + s * kTiledPairs * kTiledK + swz<kTiledK>(r0 + i * kRowsPerPass, ch), in ? xrow[i] + kc : x, in);
    if constexpr (F8) {  // K is a multiple of 128: every chunk is in
#pragma unroll
      for (int i = 0; i < kWRows; ++i)
        cp_async16(w8s + (s * kTiledRows + wr0 + i * w_pass) * kTiledK + wch * 16,
                   w8 + wrow[i] * K + kt * kTiledK + wch * 16);
    } else {
#pragma unroll
      for (int i = 0; i < kWRows; ++i)
        cp_async16(ws + s * kTiledRows * kTiledK + swz<kTiledK>(wr0 + i * w_pass, wch), in ? w + wrow[i] * K + kc : w,
                   in);
    }
  };
  // F8: the e4m3 chunks this thread copied into stage s, landed, widened into bf16 tile b.
  const auto widen = [&](int s, int b) {
#pragma unroll
    for (int i = 0; i < kWRows; ++i) {
      const int r = wr0 + i * w_pass;
      uint32_t o[8];
      e4m3x16_to_bf16(*reinterpret_cast<const uint4*>(w8s + (s * kTiledRows + r) * kTiledK + wch * 16), o);
      uint16_t* dst = ws + b * kTiledRows * kTiledK;
      *reinterpret_cast<uint4*>(dst + swz<kTiledK>(r, 2 * wch)) = make_uint4(o[0], o[1], o[2], o[3]);
      *reinterpret_cast<uint4*>(dst + swz<kTiledK>(r, 2 * wch + 1)) = make_uint4(o[4], o[5], o[6], o[7]);
    }
  };
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int wg = warp / 4;            // the warpgroup's pairs: [64 wg, 64 wg + 64), all the tile's rows
  float acc[kTiledRows / 8][4] = {};  // [n-tile][fragment] of the warp's 16 pairs
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kAhead - 1>();
    // F8: widened tile kt % 2 was last read at step kt - 2, whose wgmmas completed before kt - 1's barrier.
    if constexpr (F8) widen(kt % kTiledStages, kt % 2);
    fence_proxy_async();  // the copies and the widened tile, for wgmma's reads
    __syncthreads();      // stage kt landed (and widened) for every thread; the stage refilled next is free
    if (kt + kAhead < k_tiles) load_stage((kt + kAhead) % kTiledStages, kt + kAhead);
    cp_async_commit();
    const uint64_t xd = sw128_desc(xs + (kt % kTiledStages) * kTiledPairs * kTiledK + wg * 64 * kTiledK);
    const uint64_t wd = sw128_desc(ws + (F8 ? kt % 2 : kt % kTiledStages) * kTiledRows * kTiledK);
    reg_fence(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kTiledK / 16; ++kk) {
      if constexpr (kTiledRows == 256)
        wgmma_m64n256k16_ss(acc, xd + 2 * kk, wd + 2 * kk);
      else
        wgmma_m64n128k16_ss(acc, xd + 2 * kk, wd + 2 * kk);
    }
    wgmma_commit();
    if constexpr (F8)
      wgmma_wait_all();
    else
      wgmma_wait<1>();
    reg_fence(acc);
  }
  wgmma_wait_all();
  reg_fence(acc);
  cp_async_wait<0>();

  // Lane (g, t) holds the warp's pairs g and g + 8 at columns 2t, 2t + 1 of each n-tile.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = wg * 64 + warp % 4 * 16 + g + 8 * h;
    if (m >= n) continue;
    const int pair = pairs[m];
#pragma unroll
    for (int nt = 0; nt < kTiledRows / 8; nt += R)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = nt * 8 + 2 * t + c, o = o0 + col / 16 * OW + col % OW;
        if (o >= n_out) continue;
        float v[R];
#pragma unroll
        for (int r = 0; r < R; ++r)
          v[r] = acc[nt + r][2 * h + c] * (F8 ? __ldg(scales + int64_t(e) * expert_rows + epi.row(o, r)) : 1.0f);
        epi.store(e, pair, o, v);
      }
  }
}

// One instantiation's launch over every item the token count can make (grid rows moe_max_items,
// as the other grouped GEMMs), its shared-memory attribute set once.
template <bool F8, typename Epi>
cudaError_t launch_moe_tiled_shape(const bf16_t* x, int x_div, const MoeWeight& w, int64_t expert_rows, const Epi& epi,
                                   const int32_t* index, int P, int E, int n_out, int K, cudaStream_t s) {
  using Shape = TiledShape<F8>;
  auto* kernel = moe_tiled_kernel<Epi, F8>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Shape::kSmem));
  if (attr != cudaSuccess) return attr;
  const int outs = Shape::kRows / Epi::R;
  const dim3 grid(unsigned((n_out + outs - 1) / outs), unsigned(moe_max_items(P, E, kTiledPairs)));
  return launch_pdl(kernel, grid, dim3(kTiledThreads), Shape::kSmem, s, x, x_div, w.data, w.scales, expert_rows, epi,
                    index, P, E, n_out, K);
}

// bf16 weights, or e4m3 with a scale a row (w.groups 1) and K a multiple of 128.
template <typename Epi>
cudaError_t launch_moe_tiled(const bf16_t* x, int x_div, const MoeWeight& w, int64_t expert_rows, const Epi& epi,
                             const int32_t* index, int P, int E, int n_out, int K, cudaStream_t s) {
  if (w.scales == nullptr)
    return launch_moe_tiled_shape<false>(x, x_div, w, expert_rows, epi, index, P, E, n_out, K, s);
  if (w.groups != 1 || K % 128 != 0) return cudaErrorInvalidValue;
  return launch_moe_tiled_shape<true>(x, x_div, w, expert_rows, epi, index, P, E, n_out, K, s);
}

}  // namespace gs::cuda
