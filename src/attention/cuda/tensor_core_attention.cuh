// The tensor-core paged-attention kernel (FlashAttention-2 tiling), for prefill and mixed batches
// (prefill_attention.cu launches it) and for decode batches (tensor_core_decode_attention.cu).
//
// One CTA of 4 warps per (query tile, kv head). A tile is ROWS = 64 * MT rows (MT = 2 at D = 64,
// 1 at D = 128): TPT = ROWS / G consecutive query tokens of one request times the G query heads
// that share kv head g (row = token * G + head), so the K/V tiles a CTA loads serve every head of
// its group. Each warp owns 16 * MT rows and keeps their Q fragments, the S tiles (64 keys) and
// the O accumulators (D wide) in registers, so each K/V fragment it loads feeds MT mma pairs:
// S = Q K^T and O += P V run on mma.sync m16n8k16 (bf16 in, fp32 accumulate), and the
// S accumulators become P's A fragments without a trip through shared memory. K/V tiles of 64
// keys stream through three shared-memory stages by cp.async (XOR-swizzled 16-byte chunks, so
// ldmatrix is conflict-free), each key read from the paged cache or, for this step's new
// positions, straight from k, v (so no CTA waits on another's cache write). The mma.sync kernel
// stages each tile's cache slots in shared memory a tile ahead of its copies (RowLookup).
//
// Tile -> CTA mapping from the padded shape only: request r's tiles start at blockIdx.x =
// qsl[r] / TPT + r, which is strictly increasing in r and leaves room for ceil(qlen / TPT)
// tiles, so a grid of T / TPT + num_reqs_padded + 1 CTAs per kv head covers any batch of T
// tokens; the tail tokens [qsl[num_reqs_padded], T) form one more pseudo-request with no context
// (zero output rows, cache write only). Within a request the last (longest) tile starts first.
//
// At D = 64 the default CTA is instead two warpgroups (8 warps, 16 rows each, 128 rows) on
// Hopper's wgmma (sm_90a): S = Q K^T as m64n64k16 with Q's fragments from registers and K from
// the swizzled stage (the XOR swizzle above is wgmma's 128-byte swizzle: one 128-byte row per key,
// 1024-byte aligned stages), P from the S accumulators (same layout as mma.sync's A fragments)
// and V from its stage read transposed. Softmax, masking, tiling and the cache write are shared.
//
// Decode (short queries, 64-row mma.sync tiles) splits each context over grid z as well
// (flash-decoding on tensor cores), so one kernel serves short and long contexts at any batch: the
// split count comes from the padded shape, the tiles of each split from the actual context (a
// short one uses few splits; the rest exit at once). Each split writes its rows' (m, l, O / l)
// to the workspace and the last CTA of a (tile, kv head) to finish merges them (no combine launch).
// When a decode tile's rows fit one warp (tokens x G <= 16), the CTA's warps share out its K/V
// tiles instead and merge their softmax states at the end (merge_warps), and at D 64 the decode
// kernel is register-capped so four CTAs fit an SM.
//
// On an e4m3 cache (F8; mma.sync only) every key comes from the cache, which write_fp8_kv_cache
// filled before the kernel: the tiles land as e4m3 and are widened to f16 in shared memory
// (tensor_core_tile.cuh) for the f16 MMA (Q converted once). Each warp copies the 16-row blocks it
// widens and widens tile it + 1's after computing tile it, so a tile needs no barrier beyond the one
// every tile has. The scales fold into the softmax scale (k) and the output's normalisation (v).
//
// This file holds the kernel and its launch template; its building blocks are in
// tensor_core_tile.cuh (mma.sync tile, softmax state), tensor_core_wgmma.cuh (the wgmma tile) and
// tensor_core_split.cuh (split and warp merges).
#pragma once
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

#include "attention/cuda/decode_attention.h"
#include "attention/cuda/tensor_core_split.cuh"
#include "attention/cuda/tensor_core_tile.cuh"
#include "attention/cuda/tensor_core_wgmma.cuh"
#include "core/cuda/cuda_device.h"
#include "ops/cuda/launch.cuh"
#include "ops/kernel_options.h"

namespace gs::cuda::tensor_core {

constexpr int kStages = 3;  // K/V tiles in flight: tile it + 2 loads while tile it computes

// A CTA's shape. mma.sync (WG false): 4 warps, each owning MT m16 tiles, so every K/V fragment
// it loads from shared memory feeds MT mma pairs. wgmma (WG true, D 64, MT 1): 8 warps = two
// warpgroups of 64 rows; warp w owns rows [16 w, 16 w + 16) either way.
template <int D, int MT, bool WG>
struct Cfg {
  static constexpr int warps = WG ? 8 : 4, threads = warps * 32;
  static constexpr int rows = 16 * MT * warps;  // query rows (tokens x heads) per CTA
  static constexpr int align = WG ? 1024 : 0;   // wgmma's 128-byte swizzle wants 1024-byte stages
  static constexpr size_t smem = size_t(rows + 2 * kStages * kKeys) * D * sizeof(uint16_t) + align;
  static_assert(!WG || (D == 64 && MT == 1), "the wgmma kernel is for D 64, one m16 tile per warp");
};

// A cascade prefix pass's tile (cascade_attention.h): the batch's tokens [0, qsl[num_reqs_padded])
// as one run of request 0 (whose block-table row holds the shared prefix), tiles in order.
__device__ inline bool locate_prefix_tile(const PagedAttentionParams& p, int TPT, TileInfo& ti) {
  const int n = p.query_start_loc[p.num_reqs_padded], first = int(blockIdx.x) * TPT;
  if (first >= n) return false;
  ti = TileInfo{0, 0, n, first, min(TPT, n - first)};
  return true;
}

// Keys [kv0, kv0 + kKeys) of kv head g into one K and one V stage (zeros past kv_end), the cached
// ones found through rl. Tile-uniform paths keep the per-row work small: a tile of this step's keys
// only (every tile of a one-pass prefill) copies from k, v; a tile of cached keys only, from the
// cache; a tile across new0 decides row by row.
template <int D, int NT>
__device__ void load_kv(const PagedAttentionParams& p, const TileInfo& ti, int new0, int g, int kv0, int kv_end,
                        const RowLookup& rl, uint16_t* ks, uint16_t* vs) {
  constexpr int CPR = D / 8, RPP = NT / CPR, kRows = kKeys / RPP;  // rows a thread copies
  static_assert(kKeys % RPP == 0, "every thread copies the same number of rows");
  const int ch = int(threadIdx.x) % CPR, row0 = int(threadIdx.x) / CPR;
  const int64_t inner = int64_t(g) * D + ch * 8;
  const auto* k = static_cast<const uint16_t*>(p.k) + inner;
  const auto* v = static_cast<const uint16_t*>(p.v) + inner;
  const auto* kc = static_cast<const uint16_t*>(p.k_cache) + inner;
  const auto* vc = static_cast<const uint16_t*>(p.v_cache) + inner;
  // Up to 4 rows a thread (D 64) unrolled; the 8 rows of D 128 unrolled cost more registers than they gain.
  if (kv0 >= new0) {
#pragma unroll(kRows <= 4 ? kRows : 1)
    for (int i = 0; i < kRows; ++i) {
      const int row = row0 + i * RPP, j = kv0 + row;
      const bool ok = j < kv_end;
      const int64_t off = ok ? int64_t(ti.tok0 + j - new0) * p.hkv * D : 0;
      cp_async16(ks + swz<D>(row, ch), k + off, ok);
      cp_async16(vs + swz<D>(row, ch), v + off, ok);
    }
  } else if (kv0 + kKeys <= min(new0, kv_end)) {
#pragma unroll(kRows <= 4 ? kRows : 1)
    for (int i = 0; i < kRows; ++i) {
      const int row = row0 + i * RPP;
      const int64_t off = rl.offset<D>(p, kv0 + row, true);
      cp_async16(ks + swz<D>(row, ch), kc + off, true);
      cp_async16(vs + swz<D>(row, ch), vc + off, true);
    }
  } else {
    for (int i = 0; i < kRows; ++i) {
      const int row = row0 + i * RPP, j = kv0 + row;
      const bool ok = j < kv_end, cached = ok && j < new0;
      const int64_t off = cached ? rl.offset<D>(p, j, true) : ok ? int64_t(ti.tok0 + j - new0) * p.hkv * D : 0;
      cp_async16(ks + swz<D>(row, ch), (cached ? kc : k) + off, ok);
      cp_async16(vs + swz<D>(row, ch), (cached ? vc : v) + off, ok);
    }
  }
}

// load_kv, or on an e4m3 cache (F8) the same keys all from the cache, each warp copying the
// blocks it widens (load_fp8_blocks).
template <int D, int NT, bool F8>
__device__ __forceinline__ void load_tile(const PagedAttentionParams& p, const TileInfo& ti, int new0, int g, int kv0,
                                          int kv_end, const RowLookup& rl, uint16_t* ks, uint16_t* vs) {
  if constexpr (F8) {
    static_assert(NT == kKeys / 16 * 32, "load_fp8_blocks: a warp for each 16-row block");
    load_fp8_blocks<D>(p, rl, g, kv0, kv_end, ks, vs);
  } else
    load_kv<D, NT>(p, ti, new0, g, kv0, kv_end, rl, ks, vs);
}

// MINB > 0: at least MINB CTAs per SM (registers capped to fit; the decode CTA at D 64, whose 56 KB
// of shared memory fit four times).
template <int D, int MT, bool WG, bool SPLIT, int MINB = 0, bool F8 = false>
__global__ void __launch_bounds__(Cfg<D, MT, WG>::threads, WG ? 2 : MINB)
    tensor_core_attention_kernel(PagedAttentionParams p, int window, int T, DecodeSplit split, bool warp_split,
                                 bool stage_qsl) {
  using C = Cfg<D, MT, WG>;
  static_assert(!(F8 && WG), "an e4m3 cache runs on mma.sync");
  constexpr int ROWS = C::rows, WROWS = 16 * MT, NT = C::threads;  // rows of the CTA, of one warp
  extern __shared__ __align__(128) uint16_t smem_raw[];
  uint16_t* q_s = smem_raw;
  if constexpr (C::align > 0) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
    q_s += ((C::align - a % C::align) % C::align) / sizeof(uint16_t);
  }
  uint16_t* smem = q_s;
  uint16_t* k_s = smem + ROWS * D;  // kStages stages of kKeys x D
  uint16_t* v_s = k_s + kStages * kKeys * D;
  pdl_wait();
  pdl_trigger();

  const int G = p.hq / p.hkv, TPT = ROWS / G, rows_used = TPT * G, g = int(blockIdx.y);
  const bool prefix_pass = p.cascade_pass == kCascadePrefix;  // block-uniform
  TileInfo ti;
  if (prefix_pass ? !locate_prefix_tile(p, TPT, ti)
                  : !locate_tile(p.query_start_loc, p.num_reqs_padded, T, TPT, ti, reinterpret_cast<int32_t*>(k_s),
                                 stage_qsl ? kStages * kKeys * D : 0))
    return;

  int ctx = 0, new0 = 0;  // positions >= new0 are tokens tok0 + (j - new0) of k, v
  if (prefix_pass) {
    // Every query lies past the prefix: as if at positions >= P, so no key of [0, P) is masked.
    ctx = new0 = p.cascade_prefix_len;
  } else if (ti.r < p.num_reqs_padded) {
    ctx = min(p.seq_lens[ti.r], p.max_blocks_per_req * p.block_size);
    new0 = p.seq_lens[ti.r] - ti.qlen;
  }
  const int q_first = new0 + ti.first;  // position of the tile's first query token
  const int kv_end = max(0, min(ctx, q_first + ti.ntok));
  int kv_begin = window > 0 ? max(0, q_first - window + 1) / kKeys * kKeys : 0;
  if (p.cascade_pass == kCascadeSuffix) kv_begin = max(kv_begin, p.cascade_prefix_len);
  const int n_all = kv_end > kv_begin ? (kv_end - kv_begin + kKeys - 1) / kKeys : 0;
  // This CTA's tiles [tile0, tile0 + n_kv) of the n_all: all of them, or its split's share.
  const SplitRange sr =
      SPLIT || prefix_pass ? split_range(n_all, int(gridDim.z), split, int(blockIdx.z)) : SplitRange{1, 0, n_all};
  if (int(blockIdx.z) >= sr.splits) return;  // an unused split of a short context
  const int n_kv = sr.tiles;
  const int kv_lo = kv_begin + sr.tile0 * kKeys;  // the first key of this CTA's tiles
  __syncthreads();                                // every thread is done with locate_tile's scratch (the K/V stages)

  // Q tile: row = token * G + head of the group; rows past the tile's tokens are zeros.
  constexpr int CPR = D / 8;
  const uint16_t* qg = static_cast<const uint16_t*>(p.q);
  for (int c = threadIdx.x; c < ROWS * CPR; c += NT) {
    const int row = c / CPR, ch = c % CPR, tl = row / G;
    const bool ok = row < rows_used && tl < ti.ntok && n_kv > 0;
    const uint16_t* src = ok ? qg + (int64_t(ti.tok0 + ti.first + tl) * p.hq + g * G + row % G) * D + ch * 8 : qg;
    cp_async16(q_s + swz<D>(row, ch), src, ok);
  }
  // Groups: Q + tile 0, tile 1, tile 2, then one per iteration from the second on (tile it + 2,
  // possibly empty), so group i holds tile i and at iteration it > 0 "all but the newest group
  // done" means tile it has landed.
  const int32_t* bt = p.block_table + int64_t(ti.r) * p.max_blocks_per_req;
  const int shift = block_shift(p.block_size);
  const RowLookup table{bt, shift};
  if (n_kv > 0) load_tile<D, NT, F8>(p, ti, new0, g, kv_lo, kv_end, table, k_s, v_s);
  cp_async_commit();
  if (n_kv > 1) load_tile<D, NT, F8>(p, ti, new0, g, kv_lo + kKeys, kv_end, table, k_s + kKeys * D, v_s + kKeys * D);
  cp_async_commit();
  if (n_kv > 2)
    load_tile<D, NT, F8>(p, ti, new0, g, kv_lo + 2 * kKeys, kv_end, table, k_s + 2 * kKeys * D, v_s + 2 * kKeys * D);
  cp_async_commit();
  // From tile 3 on, the main loop of the mma.sync kernel stages each tile's cache slots a tile ahead
  // in q_s's space, free once Q's fragments are in registers (the wgmma kernel rereads Q: it keeps
  // the table). Tile t's slots: its cached positions (an e4m3 cache: every loaded one).
  int32_t* slot_s = reinterpret_cast<int32_t*>(q_s);
  const int cached_end = F8 ? kv_end : min(new0, kv_end);
  auto stage_tile_slots = [&](int t) {
    const int kv0 = kv_lo + t * kKeys;
    if (!WG && t < n_kv) stage_slots(p, bt, shift, kv0, min(kKeys, cached_end - kv0), slot_s + (t & 1) * kKeys);
  };
  auto rows_of = [&](int t) { return WG ? table : RowLookup{bt, shift, slot_s + (t & 1) * kKeys, kv_lo + t * kKeys}; };
  // The cache write's loads and stores overlap the copies in flight (this kernel reads the new
  // positions from k, v, never from the cache; an e4m3 cache was written before the kernel).
  if (!F8 && blockIdx.z == 0 && !prefix_pass)
    write_cache_rows<D>(p, ti.tok0 + ti.first, ti.ntok, g, int(threadIdx.x), NT);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // Warp split (decode, the tile's rows fit one warp's 16): every warp holds the same rows and
  // takes its own K/V tiles, kStages at a time; the warps' softmax states merge at the end.
  const bool wsplit = SPLIT && !WG && MT == 1 && warp_split && ti.ntok * G <= WROWS;
  const int row0 = wsplit ? 0 : warp * WROWS;  // the warp's first row
  // A warp with rows to compute (wgmma: a warpgroup, whose 4 warps issue each wgmma together).
  const bool active = (WG ? warp & ~3 : warp) * WROWS < min(rows_used, ti.ntok * G);
  // Per-row key bounds: keys in [lo, lim) are visible (rows past the tile's tokens reuse the
  // last token's bounds; their output is never written).
  int lim[MT][2], lo[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int tl = min((row0 + mt * 16 + (lane >> 2) + 8 * i) / G, ti.ntok - 1);
      lim[mt][i] = min(ctx, q_first + tl + 1);
      lo[mt][i] = window > 0 ? q_first + tl - window + 1 : INT_MIN;
    }
  const int tile_min_lim = min(ctx, q_first + 1);
  const int tile_max_lo = window > 0 ? q_first + ti.ntok - window : INT_MIN;
  const float sl2 = p.scale * 1.4426950408889634f * p.k_scale;

  RowState<D> st[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) st[mt].o[nd][0] = st[mt].o[nd][1] = st[mt].o[nd][2] = st[mt].o[nd][3] = 0.0f;
    st[mt].m[0] = st[mt].m[1] = -INFINITY;
    st[mt].l[0] = st[mt].l[1] = 0.0f;
  }
  // Q's fragments. mma.sync keeps them in registers across the loop; the wgmma kernel reads them
  // again from shared memory for every tile (tensor_core_wgmma.cuh: kept live across the loop, the
  // registers wgmma reads asynchronously were given to other values, and later tiles saw garbage).
  uint32_t qf[MT][D / 16][4];
  cp_async_wait<2>();  // the group of Q and tile 0
  __syncthreads();
  if constexpr (!WG) load_q_frags<D, MT>(qf, q_s, row0, lane);
  if constexpr (F8) {  // the f16 MMA of the widened e4m3 tiles
    for (auto& m : qf)
      for (auto& k : m)
        for (uint32_t& r : k) r = bf16x2_to_f16x2(r);
    if (!wsplit && n_kv > 0) widen_fp8_tile<D>(k_s, v_s, warp, C::warps);  // its blocks of tile 0 (landed above)
  }

  if (wsplit) {  // rounds of kStages tiles: warp w < kStages computes tile r0 + w of the round at r0
    for (int r0 = 0; r0 < n_kv; r0 += kStages) {
      if (r0 > 0) {
        __syncthreads();  // every warp is done with the previous round's stages
        for (int sg = 0; sg < kStages && r0 + sg < n_kv; ++sg)
          load_tile<D, NT, F8>(p, ti, new0, g, kv_lo + (r0 + sg) * kKeys, kv_end, table, k_s + sg * kKeys * D,
                               v_s + sg * kKeys * D);
        cp_async_commit();
      }
      cp_async_wait<0>();
      __syncthreads();
      const int kv0 = kv_lo + (r0 + warp) * kKeys;
      if (warp < kStages && r0 + warp < n_kv) {
        if constexpr (F8) widen_fp8_tile<D>(k_s + warp * kKeys * D, v_s + warp * kKeys * D, 0, 1);  // its own tile
        attend_tile<D, MT, F8>(qf, k_s + warp * kKeys * D, v_s + warp * kKeys * D, st,
                               kv0 + kKeys > tile_min_lim || kv0 < tile_max_lo, kv0, lim, lo, sl2);
      }
    }
    merge_warps<D, C::warps>(st[0], reinterpret_cast<float*>(k_s));
  }
  for (int it = 0, stage = 0; !wsplit && it < n_kv; ++it, stage = stage == kStages - 1 ? 0 : stage + 1) {
    const int kv0 = kv_lo + it * kKeys;
    // (tile 0 landed before the Q fragments were loaded; an e4m3 tile it was widened by its warps
    // at the end of the previous iteration, after their own copies landed)
    if (!F8 && it > 0) cp_async_wait<1>();
    if constexpr (WG) fence_proxy_async();  // for wgmma's reads
    __syncthreads();                        // tile it visible to all; every warp is done with tile it - 1's stage
    if (it > 0 && it + 2 < n_kv) {
      const int ls = stage == 0 ? kStages - 1 : stage - 1;  // (it + 2) % kStages
      load_tile<D, NT, F8>(p, ti, new0, g, kv0 + 2 * kKeys, kv_end, rows_of(it + 2), k_s + ls * kKeys * D,
                           v_s + ls * kKeys * D);
    }
    // After the barrier above: every warp has its Q fragments (it 0) and is done reading the
    // slots of tile it + 1, whose buffer tile it + 3 takes.
    stage_tile_slots(it + 3);
    if (it > 0) cp_async_commit();
    if (active) {
      const bool mask = kv0 + kKeys > tile_min_lim || kv0 < tile_max_lo;
      if constexpr (WG) {
        load_q_frags<D, MT>(qf, q_s, row0, lane);
        attend_tile_wg(qf, k_s + stage * kKeys * D, v_s + stage * kKeys * D, st, mask, kv0, lim, lo, sl2);
      } else {
        attend_tile<D, MT, F8>(qf, k_s + stage * kKeys * D, v_s + stage * kKeys * D, st, mask, kv0, lim, lo, sl2);
      }
    }
    if (F8 && it + 1 < n_kv) {  // this warp's blocks of tile it + 1, once its copies of them landed
      cp_async_wait<1>();       // every group but tile it + 2's
      const int ns = stage == kStages - 1 ? 0 : stage + 1;
      widen_fp8_tile<D>(k_s + ns * kKeys * D, v_s + ns * kKeys * D, warp, C::warps);
    }
  }
  cp_async_wait<0>();
  if (SPLIT && sr.splits > 1) {
    write_partials<D, MT>(p, ti, st, g, G, rows_used, warp * WROWS, SplitWorkspace(p, T), int(blockIdx.z));
    __syncthreads();  // every warp is done with the K/V stages, which the merge reuses
    merge_partials<D, NT>(p, ti, g, G, rows_used, T, sr.splits, reinterpret_cast<float*>(k_s));
    return;
  }
  if (p.cascade_pass != kCascadeNone) {  // a cascade pass: its partial, merged by cascade_merge
    const int slot = prefix_pass ? int(blockIdx.z) : p.cascade_slots - 1;
    write_partials<D, MT>(p, ti, st, g, G, rows_used, warp * WROWS, cascade_partials(p, T), slot);
    return;
  }

  // O / l -> out; rows with no visible key (l = 0) become zeros. An attention sink (gpt-oss; the
  // prefill kernel only, which never splits a context) joins the denominator: exp(sink - max), the
  // max in the log2 units of st.m.
  uint16_t* out = static_cast<uint16_t*>(p.out);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = warp * WROWS + mt * 16 + (lane >> 2) + 8 * i, tl = row / G;
      float l = quad_sum(st[mt].l[i]);
      if (!SPLIT && p.sinks && l > 0.0f && row < rows_used)
        l += fast_exp2(fmaf(p.sinks[g * G + row % G], 1.4426950408889634f, -st[mt].m[i]));
      const float inv = l > 0.0f ? p.v_scale / l : 0.0f;
      if (row >= rows_used || tl >= ti.ntok) continue;
      uint16_t* dst = out + (int64_t(ti.tok0 + ti.first + tl) * p.hq + g * G + row % G) * D + 2 * (lane & 3);
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
        *reinterpret_cast<uint32_t*>(dst + nd * 8) =
            pack_bf16(st[mt].o[nd][2 * i] * inv, st[mt].o[nd][2 * i + 1] * inv);
    }
}

// Launches the kernel for (D, MT, WG) on p: one CTA per (query tile, kv head), and with SPLIT
// (decode) up to decode_splits CTAs per context.
template <int D, int MT, bool WG, bool SPLIT, int MINB, bool F8 = false>
cudaError_t prepare_tensor_core() {
  constexpr auto kernel = tensor_core_attention_kernel<D, MT, WG, SPLIT, MINB, F8>;
  static const cudaError_t attr = [&] {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg<D, MT, WG>::smem));
    if (e != cudaSuccess || MINB == 0) return e;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  }();
  return attr;
}

// The CTAs of the split decode kernel for (D, MT, WG, MINB, F8) the GPU holds at once (its SMs
// times the CTAs an SM takes; 0 where it cannot run): the wave decode_splits sizes its splits for.
template <int D, int MT, bool WG, int MINB, bool F8>
int wave() {
  static const int ctas =
      prepare_tensor_core<D, MT, WG, true, MINB, F8>() != cudaSuccess
          ? 0
          : cuda_kernel_wave(reinterpret_cast<const void*>(tensor_core_attention_kernel<D, MT, WG, true, MINB, F8>),
                             Cfg<D, MT, WG>::threads, Cfg<D, MT, WG>::smem);
  return ctas;
}

template <int D, int MT, bool WG, bool SPLIT = false, int MINB = 0, bool F8 = false>
cudaError_t launch_tensor_core(const PagedAttentionParams& p, const AttentionKernelOptions& o, int window, int T,
                               cudaStream_t s) {
  using C = Cfg<D, MT, WG>;
  constexpr auto kernel = tensor_core_attention_kernel<D, MT, WG, SPLIT, MINB, F8>;
  if (const cudaError_t attr = prepare_tensor_core<D, MT, WG, SPLIT, MINB, F8>(); attr != cudaSuccess) return attr;
  const int tpt = C::rows / (p.hq / p.hkv);
  const int gx = T / tpt + p.num_reqs_padded + 1;
  DecodeSplit split;
  if constexpr (SPLIT) split = decode_splits(p, o, T, gx, wave<D, MT, WG, MINB, F8>());
  const dim3 grid(unsigned(gx), unsigned(p.hkv), unsigned(split.splits));
  return launch_pdl(kernel, grid, C::threads, C::smem, s, p, window, T, split, SPLIT && o.decode_warp_split,
                    o.stage_query_starts);
}

// A cascade prefix pass (p.cascade_pass == kCascadePrefix) on the prefill kernel of (D, MT, WG): one
// CTA per (tile of the batch's tokens, kv head, split of the prefix's `splits` equal parts).
template <int D, int MT, bool WG>
cudaError_t launch_prefix_pass(const PagedAttentionParams& p, int T, int splits, cudaStream_t s) {
  using C = Cfg<D, MT, WG>;
  constexpr auto kernel = tensor_core_attention_kernel<D, MT, WG, false, 0>;
  if (const cudaError_t attr = prepare_tensor_core<D, MT, WG, false, 0>(); attr != cudaSuccess) return attr;
  const int tpt = C::rows / (p.hq / p.hkv);
  const dim3 grid(unsigned((T + tpt - 1) / tpt), unsigned(p.hkv), unsigned(splits));
  return launch_pdl(kernel, grid, C::threads, C::smem, s, p, -1, T, DecodeSplit{splits, splits, 1, 0}, false, false);
}

static_assert(Cfg<64, 1, false>::rows == kTensorCoreMaxGroup, "the selection's limit is a decode tile's rows");
static_assert(kKeys == kDecodeTileKeys, "decode splits count the kernel's K/V tiles");

}  // namespace gs::cuda::tensor_core
