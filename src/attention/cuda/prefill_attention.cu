// Tensor-core paged attention for prefill and mixed batches (FlashAttention-2 tiling).
//
// One CTA of 4 warps per (query tile, kv head). A tile is ROWS = 64 * MT rows (MT = 2 at D = 64,
// 1 at D = 128): TPT = ROWS / G consecutive query tokens of one request times the G query heads
// that share kv head g (row = token * G + head), so the K/V tiles a CTA loads serve every head of
// its group. Each warp owns 16 * MT rows and keeps their Q fragments, the S tiles (64 keys) and
// the O accumulators (D wide) in registers, so each K/V fragment it loads feeds MT mma pairs:
// S = Q K^T and O += P V run on mma.sync m16n8k16 (bf16 in, fp32 accumulate), and the
// S accumulators become P's A fragments without a trip through shared memory. K/V tiles of 64
// keys stream through three shared-memory stages by cp.async (XOR-swizzled 16-byte chunks, so
// ldmatrix is conflict-free), each key read from the paged cache through the block table or,
// for this step's new positions, straight from k, v (so no CTA waits on another's cache write).
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
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "attention/cuda/prefill_attention.h"
#include "core/env.h"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kKeys = 64;         // keys per K/V tile
constexpr int kDefaultMtD64 = 2;  // 270 vs 216 TFLOP/s at T = 8k on an H200 (NOTES.md)
constexpr int kStages = 3;        // K/V tiles in flight: tile it + 2 loads while tile it computes
// Decode launches (short queries) split each context over up to S CTAs (grid z, from the padded
// shape): S = kDecodeSplitTarget / (num_reqs_padded x kv heads), each split at least
// kDecodeSplitMinTiles tiles of the actual context (NOTES.md: H200 A/B).
constexpr int kDecodeSplitTarget = 256;
constexpr int kDecodeSplitMinTiles = 2;

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

// Element offset of 16-byte chunk `ch` of row `row` in a [rows][D] bf16 tile: chunk index XOR
// (row mod 8), so the 8 rows an ldmatrix phase reads hit 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int ch) {
  return row * D + ((ch ^ (row & 7)) << 3);
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// c += a b for one m16n8k16 tile (a: 4 regs of bf16 pairs, b: 2 regs).
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Where a CTA's query tile lies: request r (r == num_reqs_padded: the padded tail), its first
// token tok0, and the tile's tokens [first, first + ntok) of the request's qlen new tokens.
struct TileInfo {
  int r, tok0, qlen, first, ntok;
};

__device__ bool locate_tile(const PagedAttentionParams& p, int T, int TPT, TileInfo& ti) {
  const int32_t* qsl = p.query_start_loc;
  const int x = int(blockIdx.x);
  int lo = 0, hi = p.num_reqs_padded;  // largest r with qsl[r] / TPT + r <= x
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (qsl[mid] / TPT + mid <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  ti.r = lo;
  ti.tok0 = qsl[lo];
  ti.qlen = (lo < p.num_reqs_padded ? qsl[lo + 1] : T) - ti.tok0;
  const int ntiles = (ti.qlen + TPT - 1) / TPT;
  const int idx = x - (ti.tok0 / TPT + lo);
  if (ti.qlen <= 0 || idx >= ntiles) return false;
  ti.first = (ntiles - 1 - idx) * TPT;
  ti.ntok = min(TPT, ti.qlen - ti.first);
  return true;
}

// Head g of tokens [t0, t0 + n) -> their cache slots.
template <int D, int NT>
__device__ void write_cache(const PagedAttentionParams& p, int t0, int n, int g) {
  constexpr int CPR = D / 8;
  for (int c = threadIdx.x; c < n * CPR; c += NT) {
    const int t = t0 + c / CPR, ch = c % CPR;
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0 || slot >= p.num_slots) continue;
    const int64_t src = (int64_t(t) * p.hkv + g) * D + ch * 8, dst = (slot * p.hkv + g) * D + ch * 8;
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.k_cache) + dst) =
        *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.k) + src);
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.v_cache) + dst) =
        *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.v) + src);
  }
}

// Which rows of a tile load_kv issues: all, only the cache's (and the zeros past the end: no
// read of this step's k, v), or only this step's new positions (from k, v).
enum class KvRows { All, Cache, New };

// Keys [kv0, kv0 + kKeys) of kv head g into one K and one V stage (zeros past kv_end).
template <int D, int NT>
__device__ void load_kv(const PagedAttentionParams& p, const TileInfo& ti, int new0, int g, int kv0, int kv_end,
                        uint16_t* ks, uint16_t* vs, KvRows rows = KvRows::All) {
  constexpr int CPR = D / 8, RPP = NT / CPR;
  const int ch = threadIdx.x % CPR;
  const int32_t* bt = p.block_table + int64_t(ti.r) * p.max_blocks_per_req;
  for (int row = threadIdx.x / CPR; row < kKeys; row += RPP) {
    const int j = kv0 + row;
    const bool ok = j < kv_end;
    if (rows != KvRows::All && (rows == KvRows::New) != (ok && j >= new0)) continue;
    const uint16_t* kp = static_cast<const uint16_t*>(p.k);
    const uint16_t* vp = static_cast<const uint16_t*>(p.v);
    int64_t off = 0;
    if (ok && j >= new0) {
      off = int64_t(ti.tok0 + j - new0) * p.hkv * D;
    } else if (ok) {
      const int blk = min(max(bt[j / p.block_size], 0), p.num_blocks - 1);
      off = (int64_t(blk) * p.block_size + j % p.block_size) * p.hkv * D;
      kp = static_cast<const uint16_t*>(p.k_cache);
      vp = static_cast<const uint16_t*>(p.v_cache);
    }
    off += int64_t(g) * D + ch * 8;
    cp_async16(ks + swz<D>(row, ch), kp + off, ok);
    cp_async16(vs + swz<D>(row, ch), vp + off, ok);
  }
}

// A row's sum over the 4 threads (lanes 4r .. 4r + 3) that hold its columns.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Online-softmax state of one m16 tile of a warp: this thread holds rows lane/4 and lane/4 + 8.
template <int D>
struct RowState {
  float o[D / 8][4];
  float m[2], l[2];
};

// s (16 x 64 scores of tile kv0) -> probabilities in place; rescales st.o and st.l.
template <int D>
__device__ __forceinline__ void softmax_step(float (&s)[8][4], RowState<D>& st, bool mask, int kv0, const int (&lim)[2],
                                             const int (&lo)[2], float sl2) {
  const int tq = threadIdx.x & 3;
  if (mask) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kv0 + nt * 8 + 2 * tq + (e & 1);
        if (key >= lim[e >> 1] || key < lo[e >> 1]) s[nt][e] = -INFINITY;
      }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * i], s[nt][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(st.m[i], mx * sl2);
    const float base = mnew == -INFINITY ? 0.0f : mnew;
    const float corr = fast_exp2(st.m[i] - base);
    st.m[i] = mnew;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pv = fast_exp2(fmaf(s[nt][2 * i + e], sl2, -base));
        s[nt][2 * i + e] = pv;
        sum += pv;
      }
    st.l[i] = st.l[i] * corr + sum;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      st.o[nd][2 * i] *= corr;
      st.o[nd][2 * i + 1] *= corr;
    }
  }
}

// A warp's Q fragments (MT m16k16 A tiles per 16 columns) from rows [row0, row0 + 16 MT) of q_s.
template <int D, int MT>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[MT][D / 16][4], const uint16_t* q_s, int row0, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      ldsm_x4(qf[mt][kk], q_s + swz<D>(row0 + mt * 16 + (lane & 15), kk * 2 + (lane >> 4)));
}

// One K/V tile for one warp's MT m16 tiles: S = Q K^T, softmax step, O += P V.
template <int D, int MT>
__device__ __forceinline__ void attend_tile(const uint32_t (&qf)[MT][D / 16][4], const uint16_t* ks, const uint16_t* vs,
                                            RowState<D> (&st)[MT], bool mask, int kv0, const int (&lim)[MT][2],
                                            const int (&lo)[MT][2], float sl2) {
  const int lane = threadIdx.x & 31;
  float s[MT][8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      ldsm_x4(b, ks + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816(s[mt][2 * np], qf[mt][kk], b[0], b[1]);
        mma16816(s[mt][2 * np + 1], qf[mt][kk], b[2], b[3]);
      }
    }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) softmax_step<D>(s[mt], st[mt], mask, kv0, lim[mt], lo[mt], sl2);
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldsm_x4_t(b, vs + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816(st[mt].o[2 * dp], a[mt], b[0], b[1]);
        mma16816(st[mt].o[2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// ---- wgmma (sm_90a) ----

// Shared-memory matrix descriptor of a 1024-byte-aligned tile of 128-byte rows in the 128-byte
// swizzle: start address, leading and stride byte offsets of 1024 (8 rows; the leading one is
// unused for K-major tiles and for 64-wide MN-major ones), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t sw128_desc(const void* tile) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((a & 0x3FFFF) >> 4) | uint64_t(1024 >> 4) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// Pins accumulator registers at this point of the program, so the compiler neither reads them
// before the wgmma that writes them has been waited for nor moves writes past a wgmma issue.
__device__ __forceinline__ void reg_fence(float (&r)[8][4]) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(r[i][e])::"memory");
}

__device__ __forceinline__ void reg_fence(uint32_t (&r)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(r[i][e])::"memory");
}

// d (64 x 64 per warpgroup, f32; this thread's d[nt][e] as an m16n8 C fragment of its warp's
// 16 rows) = a (registers: the warp's m16k16 A fragment, bf16) x B (descriptor; TRANS_B 1: B
// stored N-contiguous) + (accumulate ? d : 0).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TRANS_B), "r"(accumulate)
      : "memory");
}

// attend_tile on wgmma for one warp of a warpgroup (D 64): the warpgroup's 64 rows against one
// 64-key tile. K rows are K-major B (each k16 step 32 bytes further along the row); V rows are
// N-contiguous B read transposed (each k16 step 16 keys = 2048 bytes further).
__device__ __forceinline__ void attend_tile_wg(uint32_t (&qf)[1][4][4], const uint16_t* ks, const uint16_t* vs,
                                               RowState<64> (&st)[1], bool mask, int kv0, const int (&lim)[1][2],
                                               const int (&lo)[1][2], float sl2) {
  float s[8][4];
  const uint64_t kd = sw128_desc(ks), vd = sw128_desc(vs);
  // Register operands (Q's and P's fragments, the accumulators) pinned on both sides of the
  // wgmmas that read or write them asynchronously, as CUTLASS's warpgroup_fence_operand does.
  reg_fence(qf[0]);
  reg_fence(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k16<0>(s, qf[0][kk], kd + 2 * kk, kk);
  wgmma_commit();
  wgmma_wait_all();
  reg_fence(s);
  reg_fence(qf[0]);
  softmax_step<64>(s, st[0], mask, kv0, lim[0], lo[0], sl2);
  uint32_t a[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    a[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    a[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
  reg_fence(a);
  reg_fence(st[0].o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k16<1>(st[0].o, a[kk], vd + 128 * kk, 1);
  wgmma_commit();
  wgmma_wait_all();
  reg_fence(st[0].o);
}

// ---- decode split over the context (flash-decoding on tensor cores) ----

// A context of n tiles split into at most S parts of at least min_tiles tiles each, equal but for
// the last, so a short context inside a graph captured for long ones uses one or few of its
// splits (the others exit at once and nothing waits for them); split z's tiles.
struct SplitRange {
  int splits, tile0, tiles;
};
__device__ __forceinline__ SplitRange split_range(int n, int S, int min_tiles, int z) {
  int splits = max(1, min(S, n / max(1, min_tiles)));
  const int per = max(1, (n + splits - 1) / splits);
  splits = n > 0 ? (n + per - 1) / per : 1;
  const int tile0 = min(n, z * per);
  return {splits, tile0, min(per, n - tile0)};
}

// The split workspace of a launch of T tokens and gridDim.z splits (the launch's, whatever each
// context uses): (m, l) of part (token, head, split) = (t hq + h) gridDim.z + z at ml[2 part],
// its normalised output (D floats) at o[part D].
struct SplitWorkspace {
  float *ml, *o;
  __device__ SplitWorkspace(const PagedAttentionParams& p, int T)
      : ml(p.split_workspace), o(p.split_workspace + 2 * int64_t(T) * p.hq * gridDim.z) {}
};

// Part index of row `row` (token row / G of the tile, head row % G of group g) of split z.
__device__ __forceinline__ int64_t part_of(const PagedAttentionParams& p, const TileInfo& ti, int g, int G, int row,
                                           int z) {
  return (int64_t(ti.tok0 + ti.first + row / G) * p.hq + g * G + row % G) * gridDim.z + z;
}

// A warp's rows' partial softmax states (m in the log2 domain, l, O / l) -> the workspace.
template <int D, int MT>
__device__ void write_partials(const PagedAttentionParams& p, const TileInfo& ti, const RowState<D> (&st)[MT], int g,
                               int G, int rows_used, int row0, int T) {
  const SplitWorkspace ws(p, T);
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float l = quad_sum(st[mt].l[i]);
      const int row = row0 + mt * 16 + (lane >> 2) + 8 * i;
      if (row >= rows_used || row / G >= ti.ntok) continue;
      const int64_t part = part_of(p, ti, g, G, row, int(blockIdx.z));
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      float* dst = ws.o + part * D + 2 * (lane & 3);
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
        *reinterpret_cast<float2*>(dst + nd * 8) =
            make_float2(st[mt].o[nd][2 * i] * inv, st[mt].o[nd][2 * i + 1] * inv);
      if ((lane & 3) == 0) ws.ml[2 * part] = st[mt].m[i], ws.ml[2 * part + 1] = l;
    }
}

// Called by every CTA of a split (block-uniform) after write_partials: the last of the S CTAs of
// its (tile, kv head) to arrive (an atomic counter, which it resets for the next launch) merges
// the partials of each row, out = sum_s w_s o_s / sum_s w_s with w_s = l_s 2^(m_s - max m), splits
// with l_s = 0 weighing nothing. smem: (2 rows + 1) S floats of scratch (the K/V stages).
template <int D, int NT>
__device__ void merge_partials(const PagedAttentionParams& p, const TileInfo& ti, int g, int G, int rows_used, int T,
                               int S, float* smem) {
  __shared__ bool last;
  __threadfence();  // this CTA's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* c = p.split_counters + blockIdx.x * gridDim.y + blockIdx.y;
    last = atomicAdd(c, 1u) == unsigned(S - 1);
    if (last) *c = 0u;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const SplitWorkspace ws(p, T);
  const int rows = min(rows_used, ti.ntok * G);
  float *m_w = smem, *l_w = smem + rows * S, *den = smem + 2 * rows * S;
  for (int i = threadIdx.x; i < rows * S; i += NT) {  // every (row, split) state in parallel
    const int64_t part = part_of(p, ti, g, G, i / S, i % S);
    m_w[i] = __ldcg(ws.ml + 2 * part);
    l_w[i] = __ldcg(ws.ml + 2 * part + 1);
  }
  __syncthreads();
  for (int row = threadIdx.x; row < rows; row += NT) {
    float mx = -INFINITY, sum = 0.0f;
    for (int sp = 0; sp < S; ++sp)
      if (l_w[row * S + sp] > 0.0f) mx = fmaxf(mx, m_w[row * S + sp]);
    for (int sp = 0; sp < S; ++sp) {
      const float l = l_w[row * S + sp];
      const float w = l > 0.0f ? l * fast_exp2(m_w[row * S + sp] - mx) : 0.0f;
      l_w[row * S + sp] = w;  // now the split's weight
      sum += w;
    }
    den[row] = sum;
  }
  __syncthreads();
  uint16_t* out = static_cast<uint16_t*>(p.out);
  for (int e = threadIdx.x; e < rows * D; e += NT) {
    const int row = e / D, d = e % D;
    const int64_t part0 = part_of(p, ti, g, G, row, 0);
    float num = 0.0f;
    for (int sp = 0; sp < S; ++sp) {  // splits that saw no key weigh 0 and are not read
      const float w = l_w[row * S + sp];
      if (w > 0.0f) num += w * __ldcg(ws.o + (part0 + sp) * D + d);
    }
    const float o = den[row] > 0.0f ? num / den[row] : 0.0f;
    const __nv_bfloat16 b = __float2bfloat16_rn(o);
    out[(part0 / gridDim.z) * D + d] = *reinterpret_cast<const uint16_t*>(&b);
  }
}

template <int D, int MT, bool WG, bool SPLIT>
__global__ void __launch_bounds__(Cfg<D, MT, WG>::threads, WG ? 2 : 0)
    prefill_attention_kernel(PagedAttentionParams p, int window, int T, bool reload_q, int split_min_tiles,
                             bool prefetch) {
  using C = Cfg<D, MT, WG>;
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
  // With `prefetch` (GS_TC_PREFETCH=1), decode (SPLIT) launches read the metadata and start loading
  // the cache rows of their first two tiles before pdl_wait(): no kernel of the step writes either (the metadata is
  // copied in before the forward, and only this kernel writes this layer's cache, at new positions), so these loads
  // overlap the QKV projection's tail; q and the new k, v rows wait.
  const bool early = SPLIT && prefetch;
  if (!early) {
    pdl_wait();
    pdl_trigger();
  }

  const int G = p.hq / p.hkv, TPT = ROWS / G, rows_used = TPT * G, g = int(blockIdx.y);
  TileInfo ti;
  if (!locate_tile(p, T, TPT, ti)) return;

  int ctx = 0, new0 = 0;  // positions >= new0 are tokens tok0 + (j - new0) of k, v
  if (ti.r < p.num_reqs_padded) {
    ctx = min(p.seq_lens[ti.r], p.max_blocks_per_req * p.block_size);
    new0 = p.seq_lens[ti.r] - ti.qlen;
  }
  const int q_first = new0 + ti.first;  // position of the tile's first query token
  const int kv_end = max(0, min(ctx, q_first + ti.ntok));
  const int kv_begin = window > 0 ? max(0, q_first - window + 1) / kKeys * kKeys : 0;
  const int n_all = kv_end > kv_begin ? (kv_end - kv_begin + kKeys - 1) / kKeys : 0;
  // This CTA's tiles [tile0, tile0 + n_kv) of the n_all: all of them, or its split's share.
  const SplitRange sr =
      SPLIT ? split_range(n_all, int(gridDim.z), split_min_tiles, int(blockIdx.z)) : SplitRange{1, 0, n_all};
  if (int(blockIdx.z) >= sr.splits) return;  // an unused split of a short context
  const int n_kv = sr.tiles;
  const int kv_lo = kv_begin + sr.tile0 * kKeys;  // the first key of this CTA's tiles
  if (early) {
    if (n_kv > 0) load_kv<D, NT>(p, ti, new0, g, kv_lo, kv_end, k_s, v_s, KvRows::Cache);
    if (n_kv > 1)
      load_kv<D, NT>(p, ti, new0, g, kv_lo + kKeys, kv_end, k_s + kKeys * D, v_s + kKeys * D, KvRows::Cache);
    pdl_wait();
    pdl_trigger();
  }
  if (blockIdx.z == 0) write_cache<D, NT>(p, ti.tok0 + ti.first, ti.ntok, g);
  const KvRows first_rows = early ? KvRows::New : KvRows::All;  // the rest of the first two tiles

  // Q tile: row = token * G + head of the group; rows past the tile's tokens are zeros.
  constexpr int CPR = D / 8;
  const uint16_t* qg = static_cast<const uint16_t*>(p.q);
  for (int c = threadIdx.x; c < ROWS * CPR; c += NT) {
    const int row = c / CPR, ch = c % CPR, tl = row / G;
    const bool ok = row < rows_used && tl < ti.ntok && n_kv > 0;
    const uint16_t* src = ok ? qg + (int64_t(ti.tok0 + ti.first + tl) * p.hq + g * G + row % G) * D + ch * 8 : qg;
    cp_async16(q_s + swz<D>(row, ch), src, ok);
  }
  // Groups: Q + tile 0, tile 1, then one per iteration (possibly empty), so "all but the newest
  // group done" at iteration it means tile it has landed (decode: the first group also holds the
  // cache rows of tile 1 issued before pdl_wait, which only makes it wait longer).
  if (n_kv > 0) load_kv<D, NT>(p, ti, new0, g, kv_lo, kv_end, k_s, v_s, first_rows);
  cp_async_commit();
  if (n_kv > 1) load_kv<D, NT>(p, ti, new0, g, kv_lo + kKeys, kv_end, k_s + kKeys * D, v_s + kKeys * D, first_rows);
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // A warp with rows to compute (wgmma: a warpgroup, whose 4 warps issue each wgmma together).
  const bool active = (WG ? warp & ~3 : warp) * WROWS < min(rows_used, ti.ntok * G);
  // Per-row key bounds: keys in [lo, lim) are visible (rows past the tile's tokens reuse the
  // last token's bounds; their output is never written).
  int lim[MT][2], lo[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int tl = min((warp * WROWS + mt * 16 + (lane >> 2) + 8 * i) / G, ti.ntok - 1);
      lim[mt][i] = min(ctx, q_first + tl + 1);
      lo[mt][i] = window > 0 ? q_first + tl - window + 1 : INT_MIN;
    }
  const int tile_min_lim = min(ctx, q_first + 1);
  const int tile_max_lo = window > 0 ? q_first + ti.ntok - window : INT_MIN;
  const float sl2 = p.scale * 1.4426950408889634f;

  RowState<D> st[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) st[mt].o[nd][0] = st[mt].o[nd][1] = st[mt].o[nd][2] = st[mt].o[nd][3] = 0.0f;
    st[mt].m[0] = st[mt].m[1] = -INFINITY;
    st[mt].l[0] = st[mt].l[1] = 0.0f;
  }
  // Q's fragments, loaded once before the loop so that they are defined on every path into it.
  // Loaded inside the loop's first iteration instead (`if (it == 0)`), ptxas did not keep them live
  // across the loop in the wgmma kernel: their registers were reused by the first tile's softmax
  // (SASS, 121 registers), so S of every later tile was computed from garbage. Defined before the
  // loop: 128 registers, no spills. reload_q (GS_PREFILL_QRELOAD=1, for A/B timing) reloads them
  // for every tile as the previous workaround did.
  uint32_t qf[MT][D / 16][4];
  cp_async_wait<1>();  // the group of Q and tile 0
  __syncthreads();
  load_q_frags<D, MT>(qf, q_s, warp * WROWS, lane);

  for (int it = 0, stage = 0; it < n_kv; ++it, stage = stage == kStages - 1 ? 0 : stage + 1) {
    const int kv0 = kv_lo + it * kKeys;
    cp_async_wait<1>();
    if constexpr (WG) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for wgmma's reads
    __syncthreads();  // tile it visible to all; every warp is done with tile it - 1's stage
    if (it + 2 < n_kv) {
      const int ls = stage == 0 ? kStages - 1 : stage - 1;  // (it + 2) % kStages
      load_kv<D, NT>(p, ti, new0, g, kv0 + 2 * kKeys, kv_end, k_s + ls * kKeys * D, v_s + ls * kKeys * D);
    }
    cp_async_commit();
    if (active) {
      if (WG && reload_q && it > 0) load_q_frags<D, MT>(qf, q_s, warp * WROWS, lane);
      const bool mask = kv0 + kKeys > tile_min_lim || kv0 < tile_max_lo;
      if constexpr (WG)
        attend_tile_wg(qf, k_s + stage * kKeys * D, v_s + stage * kKeys * D, st, mask, kv0, lim, lo, sl2);
      else
        attend_tile<D, MT>(qf, k_s + stage * kKeys * D, v_s + stage * kKeys * D, st, mask, kv0, lim, lo, sl2);
    }
  }
  cp_async_wait<0>();
  if (SPLIT && sr.splits > 1) {
    write_partials<D, MT>(p, ti, st, g, G, rows_used, warp * WROWS, T);
    __syncthreads();  // every warp is done with the K/V stages, which the merge reuses
    merge_partials<D, NT>(p, ti, g, G, rows_used, T, sr.splits, reinterpret_cast<float*>(k_s));
    return;
  }

  // O / l -> out; rows with no visible key (l = 0) become zeros.
  uint16_t* out = static_cast<uint16_t*>(p.out);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float l = quad_sum(st[mt].l[i]);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = warp * WROWS + mt * 16 + (lane >> 2) + 8 * i, tl = row / G;
      if (row >= rows_used || tl >= ti.ntok) continue;
      uint16_t* dst = out + (int64_t(ti.tok0 + ti.first + tl) * p.hq + g * G + row % G) * D + 2 * (lane & 3);
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
        *reinterpret_cast<uint32_t*>(dst + nd * 8) =
            pack_bf16(st[mt].o[nd][2 * i] * inv, st[mt].o[nd][2 * i + 1] * inv);
    }
}

// Whether the wgmma kernel reloads Q's fragments for every K/V tile (GS_PREFILL_QRELOAD=1, for A/B
// timing against keeping them in registers, the default).
bool reload_q_per_tile() { return env_is("GS_PREFILL_QRELOAD", "1"); }

// Decode splits: aim at tc_split_target() CTAs in all (GS_TC_SPLIT_TARGET), each split at least
// tc_split_min_tiles() 64-key tiles (GS_TC_SPLIT_MIN_TILES), at most kMaxDecodeSplits per context.
constexpr int kMaxDecodeSplits = 64;
int tc_split_target() {
  static const int v = env_int("GS_TC_SPLIT_TARGET", 1, 4096, kDecodeSplitTarget);
  return v;
}
int tc_split_min_tiles() {
  static const int v = env_int("GS_TC_SPLIT_MIN_TILES", 1, 64, kDecodeSplitMinTiles);
  return v;
}
// GS_TC_PREFETCH=1: decode launches start loading the cache rows before pdl_wait(). Off by
// default: no measurable gain on an H200 (llama3.2-1b bs 1 / 4 / 8, prompt 128: 0.919 / 1.143 /
// 1.198 ms vs 0.925 / 1.136 / 1.164 without; tools/gpu/NOTES.md).
bool tc_prefetch() {
  static const bool on = env_int("GS_TC_PREFETCH", 0, 1, 0) == 1;
  return on;
}

// Splits per context of a decode launch, from the padded shape alone (num_reqs_padded, the block
// table's reach, T): 1 without a workspace, or when the workspace or the counters are too small.
int decode_splits(const PagedAttentionParams& p, int T, int gx) {
  if (!p.split_workspace || !p.split_counters || gx * p.hkv > kSplitCounters) return 1;
  const int pairs = std::max(1, p.num_reqs_padded * p.hkv);
  const int by_ctx = p.max_blocks_per_req * p.block_size / (kKeys * tc_split_min_tiles());
  const int by_ws = int(split_workspace_floats(p.D) / (size_t(T) * p.hq * (p.D + 2)));
  const int S = std::min({(tc_split_target() + pairs - 1) / pairs, kMaxDecodeSplits, by_ctx, by_ws});
  return std::max(S, 1);
}

template <int D, int MT, bool WG, bool SPLIT = false>
cudaError_t launch(const PagedAttentionParams& p, int window, int T, cudaStream_t s) {
  using C = Cfg<D, MT, WG>;
  static const cudaError_t attr = cudaFuncSetAttribute(prefill_attention_kernel<D, MT, WG, SPLIT>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::smem));
  if (attr != cudaSuccess) return attr;
  const int tpt = C::rows / (p.hq / p.hkv);
  const int gx = T / tpt + p.num_reqs_padded + 1;
  const int S = SPLIT ? decode_splits(p, T, gx) : 1;
  const dim3 grid(unsigned(gx), unsigned(p.hkv), unsigned(S));
  return launch_pdl(prefill_attention_kernel<D, MT, WG, SPLIT>, grid, C::threads, C::smem, s, p, window, T,
                    WG && reload_q_per_tile(), tc_split_min_tiles(), SPLIT && tc_prefetch());
}

// m16 tiles per warp at D = 64 on mma.sync (1 or 2; GS_PREFILL_MT overrides, for A/B timing); D =
// 128 keeps 1 (2 would need more than 255 registers).
int tiles_per_warp_d64() {
  const char* e = std::getenv("GS_PREFILL_MT");
  return e && (e[0] == '1' || e[0] == '2') && e[1] == 0 ? e[0] - '0' : kDefaultMtD64;
}

// Whether D = 64 prefill runs the wgmma kernel (GS_PREFILL_WGMMA=0: the mma.sync one, for A/B).
bool wgmma_d64() { return !env_is("GS_PREFILL_WGMMA", "0"); }

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

}  // namespace

bool prefill_attention_supported(const PagedAttentionParams& p) {
  if (p.f32 || (p.D != 64 && p.D != 128)) return false;
  if (p.hkv <= 0 || p.hq % p.hkv != 0 || p.hq / p.hkv > Cfg<64, 1, false>::rows) return false;
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.out), static_cast<const void*>(p.k_cache),
                          static_cast<const void*>(p.v_cache)})
    if (!aligned16(ptr)) return false;
  return true;
}

cudaError_t prefill_attention(const PagedAttentionParams& p, int window, int T, bool short_queries, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  if (!prefill_attention_supported(p)) return cudaErrorInvalidValue;
  if (short_queries)
    return p.D == 128 ? launch<128, 1, false, true>(p, window, T, s) : launch<64, 1, false, true>(p, window, T, s);
  if (p.D == 128) return launch<128, 1, false>(p, window, T, s);
  if (wgmma_d64()) return launch<64, 1, true>(p, window, T, s);
  return tiles_per_warp_d64() == 2 ? launch<64, 2, false>(p, window, T, s) : launch<64, 1, false>(p, window, T, s);
}

}  // namespace gs::cuda
