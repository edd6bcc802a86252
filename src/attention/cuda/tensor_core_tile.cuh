// Building blocks of the tensor-core attention kernels (tensor_core_attention.cuh): the paged cache's row
// addressing, cache writes and zero rows (shared with the decode kernels), the mma.sync m16n8k16
// wrapper (cp.async, ldmatrix and the swizzled tile layout: ops/cuda/tensor_core.cuh), a warp's
// online-softmax state and one 64-key K/V tile of FlashAttention-2 on mma.sync. Included by the
// attention/cuda kernels only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "attention/cuda/paged_attention_params.h"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace gs::cuda::tensor_core {

constexpr int kKeys = 64;  // keys per K/V tile

// log2 of a power-of-two block size (the block index of a position by shift), else -1 (by division).
__device__ __forceinline__ int block_shift(int block_size) {
  return (block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1;
}

// Slot of position j in a paged cache through a request's block-table row bt (entries clamped to
// the cache); shift = block_shift(block_size).
__device__ __forceinline__ int cache_slot(const PagedAttentionParams& p, const int32_t* bt, int shift, int j) {
  const int bi = shift >= 0 ? j >> shift : j / p.block_size;
  return min(max(bt[bi], 0), p.num_blocks - 1) * p.block_size + (j - bi * p.block_size);
}

// Where a tile's cached rows lie in a paged cache [blocks, block_size, hkv, D]: through the
// request's block-table row, or through the tile's slots staged in shared memory beforehand
// (stage_slots), which spares each row's copy a dependent table read and the block arithmetic.
struct RowLookup {
  const int32_t* bt;               // the request's block-table row
  int shift;                       // block_shift(block_size)
  const int32_t* slots = nullptr;  // if set: position kv0 + i's slot at slots[i]
  int kv0 = 0;

  // Element offset of position j's row (kv head 0); 0 where !ok (j not loaded).
  template <int D>
  __device__ __forceinline__ int64_t offset(const PagedAttentionParams& p, int j, bool ok) const {
    if (!ok) return 0;
    return int64_t(slots ? slots[j - kv0] : cache_slot(p, bt, shift, j)) * (p.hkv * D);
  }
};

// Slots of positions [kv0, kv0 + n) -> dst[0, n), by the CTA's first n threads (n <= blockDim.x).
__device__ __forceinline__ void stage_slots(const PagedAttentionParams& p, const int32_t* bt, int shift, int kv0, int n,
                                            int32_t* dst) {
  const int i = int(threadIdx.x);
  if (i < n) dst[i] = cache_slot(p, bt, shift, kv0 + i);
}

// 8 elements (chunk ch) of head g's k and v rows (bf16, 16 bytes each) -> cache slot `slot`, as
// bf16 or (F8) as e4m3(x / scale) the way write_fp8_kv_cache stores them.
template <int D, bool F8>
__device__ __forceinline__ void store_cache_chunk(const PagedAttentionParams& p, int64_t slot, int g, int ch,
                                                  const uint4& k, const uint4& v) {
  const int64_t dst = (slot * p.hkv + g) * D + ch * 8;  // in elements
  if constexpr (F8) {
    reinterpret_cast<uint2*>(static_cast<uint8_t*>(p.k_cache) + dst)[0] = bf16x8_to_e4m3x8(k, __frcp_rn(p.k_scale));
    reinterpret_cast<uint2*>(static_cast<uint8_t*>(p.v_cache) + dst)[0] = bf16x8_to_e4m3x8(v, __frcp_rn(p.v_scale));
  } else {
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.k_cache) + dst) = k;
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.v_cache) + dst) = v;
  }
}

// Head g's k, v of tokens [t0, t0 + n) -> their cache slots (slots outside the cache skipped), in
// 8-element chunks by `count` threads of which the caller is number `idx`.
template <int D, bool F8 = false>
__device__ void write_cache_rows(const PagedAttentionParams& p, int t0, int n, int g, int idx, int count) {
  constexpr int CPR = D / 8;
  for (int c = idx; c < n * CPR; c += count) {
    const int t = t0 + c / CPR, ch = c % CPR;
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0 || slot >= p.num_slots) continue;
    const int64_t src = (int64_t(t) * p.hkv + g) * D + ch * 8;
    store_cache_chunk<D, F8>(p, slot, g, ch, *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.k) + src),
                             *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.v) + src));
  }
}

// Zero output rows of kv head g's G query heads for tokens [t0, t0 + n) (tokens of no request), by
// `count` threads of which the caller is number `idx`.
template <int D>
__device__ void zero_out_rows(const PagedAttentionParams& p, int t0, int n, int g, int G, int idx, int count) {
  constexpr int CPR = D / 8;
  uint16_t* out = static_cast<uint16_t*>(p.out);
  for (int i = idx; i < n * G * CPR; i += count) {
    const int t = i / (G * CPR), rest = i % (G * CPR);
    *reinterpret_cast<uint4*>(out + (int64_t(t0 + t) * p.hq + g * G) * D + rest * 8) = make_uint4(0, 0, 0, 0);
  }
}

// An e4m3 cache's tile (PagedAttentionParams::fp8_cache): the cache rows of each 16-row block of a
// [rows][D] 16-bit tile arrive by cp.async in the second half of that block's region (row r's
// 16-byte chunk ch of 16 e4m3 at fp8_chunk<D>(tile, r, ch)), and widen_fp8_block turns the block
// into the swizzled layout above in place, as f16 (exact, one conversion instruction a pair), so
// the tile's readers are those of a 16-bit cache on the f16 MMA (attend_tile's F16: Q converted
// once, P packed as f16; the e4m3 values are at most 448, the scales stay in f32 outside). A
// block's widening reads and writes only its own region: one warp does it with no barrier but its own.
template <int D>
__device__ __forceinline__ void* fp8_chunk(uint16_t* tile, int row, int ch) {
  return reinterpret_cast<uint8_t*>(tile + (row >> 4) * 16 * D + 8 * D) + (row & 15) * D + ch * 16;
}

// Rows [0, nrows) of a K and a V buffer <- positions kv0 + row of kv head g of an e4m3 cache, rows
// found through rl (zeros from kv_end on; position `skip` left alone), by NT threads of which the
// caller is number idx; 16-byte chunk ch of a row lands at at(buffer, row, ch) (fp8_chunk here,
// keys-as-rows' own e4m3 stage layout there).
template <int D, int NT, typename Buf, typename At>
__device__ void load_fp8_rows(const PagedAttentionParams& p, const RowLookup& rl, int g, int kv0, int kv_end, int nrows,
                              Buf* ks, Buf* vs, At at, int idx, int skip = -1) {
  constexpr int CPR = D / 16, RPP = NT / CPR;
  static_assert(RPP > 0 && NT % CPR == 0, "the threads cover whole rows");
  const int ch = idx % CPR;
  for (int row = idx / CPR; row < nrows; row += RPP) {
    const int j = kv0 + row;
    if (j == skip) continue;  // the caller's own row
    const bool ok = j < kv_end;
    const int64_t off = rl.offset<D>(p, j, ok) + int64_t(g) * D + ch * 16;
    cp_async16(at(ks, row, ch), static_cast<const uint8_t*>(p.k_cache) + off, ok);
    cp_async16(at(vs, row, ch), static_cast<const uint8_t*>(p.v_cache) + off, ok);
  }
}

// Block b (rows 16 b ..) of an e4m3 tile -> f16 in place, by one warp.
template <int D>
__device__ __forceinline__ void widen_fp8_block(uint16_t* tile, int b) {
  constexpr int CPR = D / 16, N = 16 * CPR / 32;  // 16-byte e4m3 chunks of a row, of a lane
  const int lane = int(threadIdx.x) & 31;
  const uint4* src = reinterpret_cast<const uint4*>(tile + b * 16 * D + 8 * D);
  uint4 raw[N];
  __syncwarp();  // the block's rows that other lanes copied (after their cp.async waits) are visible
#pragma unroll
  for (int i = 0; i < N; ++i) raw[i] = src[i * 32 + lane];
  __syncwarp();  // every lane holds its chunks before any overwrites them
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int c = i * 32 + lane, row = b * 16 + c / CPR, ch = c % CPR;
    uint32_t o[8];
    e4m3x16_to_f16(raw[i], o);
    *reinterpret_cast<uint4*>(tile + swz<D>(row, 2 * ch)) = make_uint4(o[0], o[1], o[2], o[3]);
    *reinterpret_cast<uint4*>(tile + swz<D>(row, 2 * ch + 1)) = make_uint4(o[4], o[5], o[6], o[7]);
  }
  __syncwarp();
}

// The 4 K and 4 V blocks of a 64-key tile pair, shared out over `warps` warps: warp w takes K
// block w and V block w (of 4 warps), the blocks load_fp8_blocks has it copy.
template <int D>
__device__ __forceinline__ void widen_fp8_tile(uint16_t* ks, uint16_t* vs, int warp, int warps) {
  for (int b = warp; b < 2 * kKeys / 16; b += warps) widen_fp8_block<D>(b < kKeys / 16 ? ks : vs, b % (kKeys / 16));
}

// A 64-key tile pair of an e4m3 cache <- positions [kv0, kv0 + kKeys) (zeros from kv_end on), each
// of the 4 warps copying the K and V blocks it widens (widen_fp8_tile), so once its own copies
// have landed a warp can widen them with no barrier but its own.
template <int D>
__device__ __forceinline__ void load_fp8_blocks(const PagedAttentionParams& p, const RowLookup& rl, int g, int kv0,
                                                int kv_end, uint16_t* ks, uint16_t* vs) {
  const int w = int(threadIdx.x) >> 5, b = w * 16 * D;  // the warp's block: rows [16 w, 16 w + 16)
  load_fp8_rows<D, 32>(p, rl, g, kv0 + 16 * w, kv_end, 16, ks + b, vs + b, fp8_chunk<D>, int(threadIdx.x) & 31);
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

// The same tile on f16 inputs (an e4m3 cache's widened tiles).
__device__ __forceinline__ void mma16816_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// A bf16x2 register (Q) as f16x2, clamped to f16's range.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
  const float lo = fminf(fmaxf(__uint_as_float(v << 16), -65504.0f), 65504.0f);
  const float hi = fminf(fmaxf(__uint_as_float(v & 0xffff0000u), -65504.0f), 65504.0f);
  return pack_f16(lo, hi);
}

// c += a b on bf16 or (F16) f16 inputs; p packs two probabilities for the A or B side.
template <bool F16>
__device__ __forceinline__ void mma_16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (F16)
    mma16816_f16(c, a, b0, b1);
  else
    mma16816(c, a, b0, b1);
}
template <bool F16>
__device__ __forceinline__ uint32_t pack_16(float lo, float hi) {
  if constexpr (F16)
    return pack_f16(lo, hi);
  else
    return pack_bf16(lo, hi);
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

// CTA blockIdx.x's query tile of TPT tokens (tile -> CTA mapping: tensor_core_attention.cuh) in the
// batch that query starts qsl[0 .. num_reqs_padded] and T tokens (padded) describe; false: none.
// The search reads qsl from `scratch` (shared) when its num_reqs_padded + 1 entries fit `cap`:
// one parallel load instead of a chain of log2(num_reqs) dependent global loads. The caller syncs
// before it reuses scratch.
__device__ inline bool locate_tile(const int32_t* qsl, int num_reqs_padded, int T, int TPT, TileInfo& ti,
                                   int32_t* scratch, int cap) {
  if (num_reqs_padded + 1 <= cap) {  // block-uniform
    for (int i = int(threadIdx.x); i <= num_reqs_padded; i += int(blockDim.x)) scratch[i] = qsl[i];
    __syncthreads();
    qsl = scratch;
  }
  const int x = int(blockIdx.x);
  int lo = 0, hi = num_reqs_padded;  // largest r with qsl[r] / TPT + r <= x
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (qsl[mid] / TPT + mid <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  ti.r = lo;
  ti.tok0 = qsl[lo];
  ti.qlen = (lo < num_reqs_padded ? qsl[lo + 1] : T) - ti.tok0;
  const int ntiles = (ti.qlen + TPT - 1) / TPT;
  const int idx = x - (ti.tok0 / TPT + lo);
  if (ti.qlen <= 0 || idx >= ntiles) return false;
  ti.first = (ntiles - 1 - idx) * TPT;
  ti.ntok = min(TPT, ti.qlen - ti.first);
  return true;
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

// One K/V tile for one warp's MT m16 tiles: S = Q K^T, softmax step, O += P V (F16: f16 tiles).
template <int D, int MT, bool F16 = false>
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
        mma_16<F16>(s[mt][2 * np], qf[mt][kk], b[0], b[1]);
        mma_16<F16>(s[mt][2 * np + 1], qf[mt][kk], b[2], b[3]);
      }
    }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) softmax_step<D>(s[mt], st[mt], mask, kv0, lim[mt], lo[mt], sl2);
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      a[mt][0] = pack_16<F16>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack_16<F16>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack_16<F16>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack_16<F16>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldsm_x4_t(b, vs + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16<F16>(st[mt].o[2 * dp], a[mt], b[0], b[1]);
        mma_16<F16>(st[mt].o[2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

}  // namespace gs::cuda::tensor_core
