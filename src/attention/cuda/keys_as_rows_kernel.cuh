// Decode attention on tensor cores with the keys as the MMA's 16-row side
// (keys_as_rows_decode_attention.cu launches it for single-token decode batches).
//
// The tensor-core decode kernel puts a GQA group's G <= 8 query rows on the 16-row side of
// m16n8k16 and 64 keys on the 8-column side, so at G = 4 three quarters of its mma, softmax and
// state work is on empty rows, and one 64-key tile a warp makes a long serial chain per CTA. Here
// S^T = K Q^T: a warp takes a block of 16 keys (A, by ldmatrix from the swizzled K stage) times
// the group's 8 query columns (B, Q^T held in registers, columns past G zero), so a 16-key block
// costs D / 16 mma; the online softmax runs per query column (a lane holds 2 columns of 2 keys
// per block, the column's 8 lanes agree on its maximum by 3 shuffles); P^T goes from the S^T
// accumulators to O^T = V^T P^T's B fragments by movmatrix.trans (no shared memory), and V^T's A
// fragments come from the V stage by ldmatrix.trans. A CTA of 4 warps serves one pair: K/V stages
// of 64 keys (16 a warp) stream through NS shared-memory buffers by cp.async, and the warps'
// states merge through shared memory at the end (in warp order: deterministic). Few pairs split
// each context over grid z as the tensor-core kernel does (its split count from the padded shape,
// its 64-key tiles = this kernel's stages, the partials merged by the last CTA to arrive:
// tensor_core_split.cuh), so short and long contexts both keep the GPU busy. The keys at this
// step's position come straight from k, v (no CTA waits on a cache write); the CTA writes its
// head's new k, v to the cache. Pairs of the pseudo-request num_reqs_padded (tokens past
// query_start_loc[num_reqs_padded]) write the cache and zero their output rows. Needs every
// request to have at most one new token (max_query_len 1).
//
// On an e4m3 cache (F8) the CTA quantizes this step's k, v into its stage and the cache (the value
// the cache will hold, so every position reads as the cache), and the stages hold e4m3 (swz8): twice the keys in flight
// in the same shared memory, which is what a kernel bound by keys in flight gains from half the bytes. The MMAs run on
// f16, each fragment widened in registers by the hardware conversion: K's A fragments by ldmatrix on the byte rows (a
// lane gets 4 consecutive k of a row, so the k slots of one m16n8k16 hold k 4t .. 4t + 3 and Q^T's B fragments are
// loaded in that order), V^T's by 32-bit loads of four adjacent dims of 4 keys serving two m16 tiles (so O^T's rows are
// dims in another order, which the merge maps back: o_dim). Included only by keys_as_rows_decode_attention.cu.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "attention/cuda/paged_attention_params.h"
#include "attention/cuda/tensor_core_split.cuh"
#include "attention/cuda/tensor_core_tile.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda::keys_as_rows {

using tensor_core::fast_exp2;

constexpr int kWarps = 4;                // key blocks of a stage, one a warp
constexpr int kStageKeys = 16 * kWarps;  // keys of a K/V stage
static_assert(kStageKeys == tensor_core::kKeys, "a stage is a split tile of the tensor-core kernel");
constexpr int kMaxG = 8;  // query columns of the n8 tiles
constexpr unsigned kFull = 0xffffffffu;

// The merge's floats a warp leaves: O^T (D x 8) then m, l of the 8 columns.
template <int D>
constexpr int kMergeFloats = (D + 2) * kMaxG;

template <int D, int NS, bool F8 = false>
struct Cfg {
  static constexpr int threads = kWarps * 32;
  static constexpr size_t smem = size_t(2 * NS * kStageKeys) * D * (F8 ? 1 : sizeof(uint16_t));
  static_assert(size_t(kWarps) * kMergeFloats<D> * sizeof(float) <= smem, "the merge reuses the K/V stages");
};

// Byte offset of 16-byte chunk ch (16 e4m3) of row `row` in an e4m3 stage [kStageKeys][D]: the
// chunk index XOR a row function, so the 8 rows of an ldmatrix phase and the 4 rows of a V load hit
// different banks.
template <int D>
__device__ __forceinline__ int swz8(int row, int ch) {
  return row * D + ((ch ^ (D == 128 ? row & 7 : (row >> 1) & 3)) << 4);
}

__device__ __forceinline__ uint32_t movmatrix_t(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// Keys [kv0, kv0 + kStageKeys) of kv head g of request r into one K and one V stage (zeros past
// kv_end); the key at position `now` is this step's token tok, read from k, v, or left out
// (with_now false: NowChunk::to_stage() writes it once the QKV projection is done).
template <int D, int NT>
__device__ void load_stage(const PagedAttentionParams& p, const int32_t* bt, int shift, int g, int kv0, int kv_end,
                           int now, int tok, uint16_t* ks, uint16_t* vs, bool with_now = true) {
  constexpr int CPR = D / 8, RPP = NT / CPR;
  const int ch = int(threadIdx.x) % CPR;
  for (int row = int(threadIdx.x) / CPR; row < kStageKeys; row += RPP) {
    const int j = kv0 + row;
    const bool ok = j < kv_end;
    if (j == now && !with_now) continue;
    const uint16_t* kp = static_cast<const uint16_t*>(p.k);
    const uint16_t* vp = static_cast<const uint16_t*>(p.v);
    int64_t off = 0;
    if (ok && j == now) {
      off = int64_t(tok) * p.hkv * D;
    } else if (ok) {
      off = tensor_core::RowLookup{bt, shift}.offset<D>(p, j, true);
      kp = static_cast<const uint16_t*>(p.k_cache);
      vp = static_cast<const uint16_t*>(p.v_cache);
    }
    off += int64_t(g) * D + ch * 8;
    cp_async16(ks + swz<D>(row, ch), kp + off, ok);
    cp_async16(vs + swz<D>(row, ch), vp + off, ok);
  }
}

// This step's k, v of head g (token tok): thread c < D / 8 holds 16-byte chunk c of each, loaded
// with the CTA's q (one L2 round trip for all three), then stored to the stage row and the cache,
// on an e4m3 cache (F8) as the cache holds them (so the stage reads what the cache will hold).
template <int D, bool F8>
struct NowChunk {
  uint4 k, v;
  bool has;
  __device__ NowChunk(const PagedAttentionParams& p, int tok, int g) : has(int(threadIdx.x) < D / 8) {
    const int64_t src = (int64_t(tok) * p.hkv + g) * D + int(threadIdx.x) * 8;
    if (has) {
      k = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.k) + src);
      v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.v) + src);
    }
  }
  // Into row `row` of one K and one V stage (plain stores: visible to the CTA after its next barrier).
  template <typename E>
  __device__ void to_stage(const PagedAttentionParams& p, int row, E* ks, E* vs) const {
    if (!has) return;
    const int c = int(threadIdx.x);
    if constexpr (F8) {  // 8 e4m3: half of 16-byte chunk c / 2
      const int at = swz8<D>(row, c >> 1) + (c & 1) * 8;
      *reinterpret_cast<uint2*>(ks + at) = bf16x8_to_e4m3x8(k, __frcp_rn(p.k_scale));
      *reinterpret_cast<uint2*>(vs + at) = bf16x8_to_e4m3x8(v, __frcp_rn(p.v_scale));
    } else {
      *reinterpret_cast<uint4*>(ks + swz<D>(row, c)) = k;
      *reinterpret_cast<uint4*>(vs + swz<D>(row, c)) = v;
    }
  }
  // Into the token's cache slot (skipped outside the cache), as tensor_core::write_cache_rows writes it.
  __device__ void to_cache(const PagedAttentionParams& p, int64_t slot, int g) const {
    if (!has || slot < 0 || slot >= p.num_slots) return;
    tensor_core::store_cache_chunk<D, F8>(p, slot, g, int(threadIdx.x), k, v);
  }
};

// A warp's online-softmax state of its lane's 2 query columns (2 (lane % 4) and + 1): O^T
// accumulators of D / 16 m16 tiles (dims 16 mt + lane / 4 (+ 8)), the column maxima (log2
// domain, equal across the column's 8 lanes) and this lane's share of the column sums.
template <int D>
struct ColState {
  float o[D / 16][4];
  float m[2], l[2];
};

// A block's scores s (S^T accumulators: key key0 + lane / 4 + 8 (e / 2), column 2 (lane % 4) + e % 2)
// -> keys >= kv_end masked, the softmax step per column (st's maxima and sums; corr rescales O^T),
// and P (16 keys x 8 columns, two 8x8 blocks in the accumulator layout) -> P^T, the B fragments
// (b0, b1) of O^T += V^T P^T (k = the block's 16 keys, n = the 8 columns), bf16 or (F16) f16.
template <int D, bool F16>
__device__ __forceinline__ void softmax_block(float (&s)[4], ColState<D>& st, int key0, int kv_end, float sl2,
                                              float (&corr)[2], uint32_t& b0, uint32_t& b1) {
  const int lane = int(threadIdx.x) & 31;
  const int k_lo = key0 + (lane >> 2);
  if (k_lo >= kv_end) s[0] = s[1] = -INFINITY;
  if (k_lo + 8 >= kv_end) s[2] = s[3] = -INFINITY;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    float mx = fmaxf(s[c], s[2 + c]);
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 16));
    const float mnew = fmaxf(st.m[c], mx * sl2);
    const float base = mnew == -INFINITY ? 0.0f : mnew;
    corr[c] = fast_exp2(st.m[c] - base);
    st.m[c] = mnew;
    s[c] = fast_exp2(fmaf(s[c], sl2, -base));
    s[2 + c] = fast_exp2(fmaf(s[2 + c], sl2, -base));
    st.l[c] = st.l[c] * corr[c] + s[c] + s[2 + c];
  }
  b0 = movmatrix_t(tensor_core::pack_16<F16>(s[0], s[1]));
  b1 = movmatrix_t(tensor_core::pack_16<F16>(s[2], s[3]));
}

template <int D>
__device__ __forceinline__ void rescale(ColState<D>& st, int mt, const float (&corr)[2]) {
  st.o[mt][0] *= corr[0], st.o[mt][2] *= corr[0];
  st.o[mt][1] *= corr[1], st.o[mt][3] *= corr[1];
}

// One 16-key block (keys key0 .. of the stage rows at ks / vs from row0) for one warp: S^T = K Q^T,
// the softmax step, O^T += V^T P^T.
template <int D>
__device__ __forceinline__ void attend_block(const uint32_t (&qf)[D / 16][2], const uint16_t* ks, const uint16_t* vs,
                                             int row0, ColState<D>& st, int key0, int kv_end, float sl2) {
  const int lane = int(threadIdx.x) & 31;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    ldsm_x4(a, ks + swz<D>(row0 + (lane & 15), kk * 2 + (lane >> 4)));
    tensor_core::mma16816(s, a, qf[kk][0], qf[kk][1]);
  }
  float corr[2];
  uint32_t b0, b1;
  softmax_block<D, false>(s, st, key0, kv_end, sl2, corr, b0, b1);
#pragma unroll
  for (int mt = 0; mt < D / 16; ++mt) {
    rescale<D>(st, mt, corr);
    uint32_t a[4];  // V^T rows 16 mt .. (dims), columns = the block's keys
    ldsm_x4_t(a, vs + swz<D>(row0 + (lane & 7) + ((lane >> 4) << 3), mt * 2 + ((lane >> 3) & 1)));
    tensor_core::mma16816(st.o[mt], a, b0, b1);
  }
}

// The same block on e4m3 stages (swz8) and f16 MMAs; qf holds Q^T in the k order of K's fragments
// (slots 2t, 2t + 1, 2t + 8, 2t + 9 of m16n8k16 kk = k 16 kk + 4t .. 4t + 3), and O^T's rows of
// tile mt are dims permuted as o_dim says.
template <int D>
__device__ __forceinline__ void attend_block_fp8(const uint32_t (&qf)[D / 16][2], const uint8_t* ks, const uint8_t* vs,
                                                 int row0, ColState<D>& st, int key0, int kv_end, float sl2) {
  const int lane = int(threadIdx.x) & 31, t = lane & 3, g = lane >> 2;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int kk2 = 0; kk2 < D / 32; ++kk2) {  // 32 k a step: rows g, g + 8, bytes 4t .. of two 16-byte chunks
    uint32_t r[4];
    ldsm_x4(r, ks + swz8<D>(row0 + (lane & 15), kk2 * 2 + (lane >> 4)));
    const uint32_t a0[4] = {e4m3x2_to_f16x2(r[0]), e4m3x2_to_f16x2(r[1]), e4m3x2_to_f16x2(r[0] >> 16),
                            e4m3x2_to_f16x2(r[1] >> 16)};
    tensor_core::mma16816_f16(s, a0, qf[2 * kk2][0], qf[2 * kk2][1]);
    const uint32_t a1[4] = {e4m3x2_to_f16x2(r[2]), e4m3x2_to_f16x2(r[3]), e4m3x2_to_f16x2(r[2] >> 16),
                            e4m3x2_to_f16x2(r[3] >> 16)};
    tensor_core::mma16816_f16(s, a1, qf[2 * kk2 + 1][0], qf[2 * kk2 + 1][1]);
  }
  float corr[2];
  uint32_t b0, b1;
  softmax_block<D, true>(s, st, key0, kv_end, sl2, corr, b0, b1);
  // Per 32 dims: dims 4g .. 4g + 3 of keys 2t, 2t + 1, 2t + 8, 2t + 9 (one 32-bit load each) serve
  // tiles 2m (dims 4g, + 1) and 2m + 1 (4g + 2, + 3), as (dim, key pair) bytes for V^T's A fragments.
#pragma unroll
  for (int m = 0; m < D / 32; ++m) {
    const int off = ((g >> 2) << 4) + 4 * (g & 3);
    auto v4 = [&](int key) {
      const int row = row0 + key;
      return *reinterpret_cast<const uint32_t*>(vs + swz8<D>(row, 2 * m + (off >> 4)) + (off & 15));
    };
    const uint32_t x0 = v4(2 * t), x1 = v4(2 * t + 1), x2 = v4(2 * t + 8), x3 = v4(2 * t + 9);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t sel = h == 0 ? 0x5140u : 0x7362u;  // bytes (2h, 2h + 1) of the keys, interleaved
      const uint32_t lo = __byte_perm(x0, x1, sel), hi = __byte_perm(x2, x3, sel);
      const uint32_t a[4] = {e4m3x2_to_f16x2(lo), e4m3x2_to_f16x2(lo >> 16), e4m3x2_to_f16x2(hi),
                             e4m3x2_to_f16x2(hi >> 16)};
      rescale<D>(st, 2 * m + h, corr);
      tensor_core::mma16816_f16(st.o[2 * m + h], a, b0, b1);
    }
  }
}

// The dim of O^T's row g (hi: g + 8) of tile mt: 16 mt + g (+ 8), or in attend_block_fp8's order
// 32 (mt / 2) + 4g + 2 (mt % 2) (+ 1).
template <bool F8>
__device__ __forceinline__ int o_dim(int mt, int g, bool hi) {
  return F8 ? (mt >> 1) * 32 + 4 * g + 2 * (mt & 1) + (hi ? 1 : 0) : mt * 16 + g + (hi ? 8 : 0);
}

// The CTA's 4 warp states -> out rows of the G heads (merged in warp order), through `scratch`;
// with splits > 1 the CTA's part (m, l, O / l) goes to the split workspace instead, and the last
// CTA of the (request, kv head) to arrive merges the parts into out.
template <int D, bool F8>
__device__ void merge_and_store(const PagedAttentionParams& p, ColState<D>& st, int tok, int g, int G, int T,
                                int splits, float* scratch) {
  constexpr int F = kMergeFloats<D>;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
#pragma unroll
  for (int c = 0; c < 2; ++c) {  // the column's sum over its 8 lanes
    st.l[c] += __shfl_xor_sync(kFull, st.l[c], 4);
    st.l[c] += __shfl_xor_sync(kFull, st.l[c], 8);
    st.l[c] += __shfl_xor_sync(kFull, st.l[c], 16);
  }
  __syncthreads();  // every warp is done with the K/V stages
  float* w = scratch + warp * F;
  const int c0 = 2 * (lane & 3);
#pragma unroll
  for (int mt = 0; mt < D / 16; ++mt) {
    const int d = o_dim<F8>(mt, lane >> 2, false), d8 = o_dim<F8>(mt, lane >> 2, true);
    w[d * kMaxG + c0] = st.o[mt][0], w[d * kMaxG + c0 + 1] = st.o[mt][1];
    w[d8 * kMaxG + c0] = st.o[mt][2], w[d8 * kMaxG + c0 + 1] = st.o[mt][3];
  }
  if (lane < 4) {
    w[D * kMaxG + c0] = st.m[0], w[D * kMaxG + c0 + 1] = st.m[1];
    w[D * kMaxG + kMaxG + c0] = st.l[0], w[D * kMaxG + kMaxG + c0 + 1] = st.l[1];
  }
  __syncthreads();
  uint16_t* out = static_cast<uint16_t*>(p.out) + (int64_t(tok) * p.hq + int64_t(g) * G) * D;
  const tensor_core::SplitWorkspace ws(p, T);
  for (int e = int(threadIdx.x); e < G * D; e += int(blockDim.x)) {
    const int c = e / D, d = e % D;
    float mx = -INFINITY;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) mx = fmaxf(mx, scratch[v * F + D * kMaxG + c]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) {
      const float f = fast_exp2(scratch[v * F + D * kMaxG + c] - base);  // a warp that saw no key: 0
      num += f * scratch[v * F + d * kMaxG + c];
      den += f * scratch[v * F + D * kMaxG + kMaxG + c];
    }
    const float o = den > 0.0f ? num / den * p.v_scale : 0.0f;
    if (splits > 1) {  // part (token, head, split) as tensor_core::SplitWorkspace lays it out
      const int64_t part = (int64_t(tok) * p.hq + int64_t(g) * G + c) * gridDim.z + blockIdx.z;
      ws.o[part * D + d] = o;
      if (d == 0) ws.ml[2 * part] = mx, ws.ml[2 * part + 1] = den;
      continue;
    }
    const __nv_bfloat16 b = __float2bfloat16_rn(o);
    out[e] = *reinterpret_cast<const uint16_t*>(&b);
  }
  if (splits > 1) {
    __syncthreads();  // every thread is done with scratch, which the merge reuses
    const tensor_core::TileInfo ti{0, tok, 1, 0, 1};
    tensor_core::merge_partials<D, kWarps * 32>(p, ti, g, G, G, T, splits, scratch);
  }
}

// Grid (num_reqs_padded + 1, hkv, splits): CTA (r, g, z) serves split z of request r's token (if
// it has one) and kv head g; column num_reqs_padded serves the tail tokens [qsl[num_reqs_padded], T).
template <int D, int NS, bool F8 = false>
__global__ void __launch_bounds__(Cfg<D, NS, F8>::threads)
    keys_as_rows_decode_kernel(PagedAttentionParams p, int window, int T, DecodeSplit split, bool early) {
  using C = Cfg<D, NS, F8>;
  using E = std::conditional_t<F8, uint8_t, uint16_t>;  // a stage element: e4m3 or bf16
  extern __shared__ __align__(128) uint16_t smem[];
  E* k_s = reinterpret_cast<E*>(smem);  // NS stages of kStageKeys x D
  E* v_s = k_s + NS * kStageKeys * D;
  // `early` (AttentionKernelOptions::keys_as_rows_early_loads): the step's metadata (query_start_loc,
  // seq_lens, block table) and the cache rows of earlier positions are written before the step's
  // first kernel and by no kernel of it (this kernel writes position `now` only), so they load
  // before pdl_wait(), overlapping the previous kernel's tail; q and this token's k, v wait.
  if (!early) pdl_wait(), pdl_trigger();
  const int r = int(blockIdx.x), g = int(blockIdx.y), G = p.hq / p.hkv;
  const bool tail = r == p.num_reqs_padded;
  const int tok = p.query_start_loc[r];
  const int qlen = tail ? 0 : p.query_start_loc[r + 1] - tok, seq = tail ? 0 : p.seq_lens[r];
  if (tail) {                     // the tail: cache writes (padding slots are skipped) and zero rows, by split 0
    if (blockIdx.z != 0) return;  // before any wait, so that it holds no SM's room
    if (early) pdl_wait(), pdl_trigger();
    tensor_core::write_cache_rows<D, F8>(p, tok, T - tok, g, int(threadIdx.x), C::threads);
    tensor_core::zero_out_rows<D>(p, tok, T - tok, g, G, int(threadIdx.x), C::threads);
    return;
  }
  if (qlen != 1) return;  // no token this step
  const int ctx = min(seq, p.max_blocks_per_req * p.block_size), now = seq - 1;
  const int kv_begin = window > 0 ? max(0, now - window + 1) : 0;
  const int kv_end0 = max(kv_begin, min(ctx, now + 1));
  // This CTA's stages of the context's n_all: all of them, or its split's share.
  const int n_all = (kv_end0 - kv_begin + kStageKeys - 1) / kStageKeys;
  const tensor_core::SplitRange sr = tensor_core::split_range(n_all, int(gridDim.z), split, int(blockIdx.z));
  if (int(blockIdx.z) >= sr.splits) return;  // an unused split of a short context
  const int nst = sr.tiles, kv_lo = kv_begin + sr.tile0 * kStageKeys;
  const int kv_end = min(kv_end0, kv_lo + nst * kStageKeys);
  const int32_t* bt = p.block_table + int64_t(r) * p.max_blocks_per_req;
  const int shift = tensor_core::block_shift(p.block_size);
  // Stage i <- keys from kv0 (with_now: this step's key from k, v; on an e4m3 cache never: the
  // kernel quantizes and stores that row itself, NowChunk::to_stage).
  auto load = [&](int i, int kv0, bool with_now) {
    if constexpr (F8)
      tensor_core::load_fp8_rows<D, C::threads>(
          p, tensor_core::RowLookup{bt, shift}, g, kv0, kv_end, kStageKeys, k_s + i * kStageKeys * D,
          v_s + i * kStageKeys * D, [](uint8_t* b, int row, int ch) { return b + swz8<D>(row, ch); }, int(threadIdx.x),
          now < kv_end ? now : -1);
    else
      load_stage<D, C::threads>(p, bt, shift, g, kv0, kv_end, now, tok, k_s + i * kStageKeys * D,
                                v_s + i * kStageKeys * D, with_now);
  };
#pragma unroll
  for (int i = 0; i < NS; ++i) {
    if (i < nst) load(i, kv_lo + i * kStageKeys, !early);
    cp_async_commit();
  }
  if (early) pdl_wait(), pdl_trigger();
  // Every global load of what the previous kernels wrote (q, this token's k, v) and the slot, at once.
  const int64_t slot = p.slot_mapping[tok];
  const NowChunk<D, F8> now_kv(p, tok, g);
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  // Q^T's B fragments: column n = lane / 4 (head g G + n, zero past G), dims 16 kk + 2 (lane % 4) (+ 8).
  uint32_t qf[D / 16][2];
  {
    const int n = lane >> 2;
    const uint32_t* q = reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(p.q) +
                                                          (int64_t(tok) * p.hq + int64_t(g) * G + min(n, G - 1)) * D);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // loaded whatever n (a valid head), then zeroed past G
      // F8: f16, dims 16 kk + 4 (lane % 4) .. + 3 (attend_block_fp8's k order)
      const int i0 = F8 ? kk * 8 + 2 * (lane & 3) : kk * 8 + (lane & 3), i1 = F8 ? i0 + 1 : i0 + 4;
      const uint32_t lo = F8 ? tensor_core::bf16x2_to_f16x2(q[i0]) : q[i0];
      const uint32_t hi = F8 ? tensor_core::bf16x2_to_f16x2(q[i1]) : q[i1];
      qf[kk][0] = n < G ? lo : 0u;
      qf[kk][1] = n < G ? hi : 0u;
    }
  }
  if (F8 || early) {  // the prologue left now's row of its stage (if it loaded that stage) to this copy
    const int i_now = (now - kv_lo) / kStageKeys;
    if (now >= kv_lo && now < kv_end && i_now < NS)
      now_kv.to_stage(p, now - kv_lo - i_now * kStageKeys, k_s + i_now * kStageKeys * D, v_s + i_now * kStageKeys * D);
  }
  if (blockIdx.z == 0) now_kv.to_cache(p, slot, g);  // the stages read now's k, v from k, v, never the cache

  ColState<D> st;
#pragma unroll
  for (int mt = 0; mt < D / 16; ++mt) st.o[mt][0] = st.o[mt][1] = st.o[mt][2] = st.o[mt][3] = 0.0f;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.0f;
  const float sl2 = p.scale * 1.4426950408889634f * p.k_scale;

  for (int s = 0; s < nst; ++s) {
    cp_async_wait<NS - 1>();  // stage s (groups 0 .. s of the NS + s committed) has landed
    __syncthreads();
    const int buf = s % NS, key0 = kv_lo + s * kStageKeys + warp * 16;
    if (key0 < kv_end) {
      if constexpr (F8)
        attend_block_fp8<D>(qf, k_s + buf * kStageKeys * D, v_s + buf * kStageKeys * D, warp * 16, st, key0, kv_end,
                            sl2);
      else
        attend_block<D>(qf, k_s + buf * kStageKeys * D, v_s + buf * kStageKeys * D, warp * 16, st, key0, kv_end, sl2);
    }
    if (s + NS < nst) {
      __syncthreads();  // every warp is done with this buffer
      const int kv0 = kv_lo + (s + NS) * kStageKeys;
      load(buf, kv0, true);
      if (F8 && now >= kv0 && now < min(kv_end, kv0 + kStageKeys))
        now_kv.to_stage(p, now - kv0, k_s + buf * kStageKeys * D, v_s + buf * kStageKeys * D);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  merge_and_store<D, F8>(p, st, tok, g, G, T, sr.splits, reinterpret_cast<float*>(smem));
}

}  // namespace gs::cuda::keys_as_rows
