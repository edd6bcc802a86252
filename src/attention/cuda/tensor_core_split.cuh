// Decode (short-query) launches of the tensor-core attention kernel (tensor_core_attention.cuh): the split
// of a context over grid z (flash-decoding on tensor cores), the partials workspace and the merge by the
// last CTA of each split group. Included by the tensor-core and keys-as-rows kernels.
#pragma once
#include "attention/cuda/decode_attention.h"
#include "attention/cuda/tensor_core_tile.cuh"

namespace gs::cuda::tensor_core {

// A context of n tiles split into at most S parts, as many as `rule` gives (DecodeSplit), equal but
// for the last, so a short context inside a graph captured for long ones uses one or few of its
// splits (the others exit at once and nothing waits for them); split z's tiles.
struct SplitRange {
  int splits, tile0, tiles;
};
__device__ __forceinline__ SplitRange split_range(int n, int S, const DecodeSplit& rule, int z) {
  const int want = rule.max_tiles > 0 ? max(rule.base, (n + rule.max_tiles - 1) / rule.max_tiles) : S;
  int splits = max(1, min(min(S, want), n / max(1, rule.min_tiles)));
  const int per = max(1, (n + splits - 1) / splits);
  splits = n > 0 ? (n + per - 1) / per : 1;
  const int tile0 = min(n, z * per);
  return {splits, tile0, min(per, n - tile0)};
}

// The split workspace of a launch of T tokens and gridDim.z splits (the launch's, whatever each
// context uses): (m, l) of part (token, head, split) = (t hq + h) gridDim.z + z at ml[2 part],
// its normalised output (D floats) at o[part D].
// The cascade partials (p.cascade_partials, cascade_attention.h) are laid out the same way with
// p.cascade_slots parts per (token, head).
struct SplitWorkspace {
  float *ml, *o;
  int slots;
  __device__ SplitWorkspace(const PagedAttentionParams& p, int T)
      : ml(p.split_workspace), o(p.split_workspace + 2 * int64_t(T) * p.hq * gridDim.z), slots(int(gridDim.z)) {}
  __device__ SplitWorkspace(float* base, int64_t rows, int slots_)
      : ml(base), o(base + 2 * rows * slots_), slots(slots_) {}
};

__device__ __forceinline__ SplitWorkspace cascade_partials(const PagedAttentionParams& p, int T) {
  return SplitWorkspace(p.cascade_partials, int64_t(T) * p.hq, p.cascade_slots);
}

// Part index of row `row` (token row / G of the tile, head row % G of group g) of slot z of `slots`.
__device__ __forceinline__ int64_t part_of(const PagedAttentionParams& p, const TileInfo& ti, int g, int G, int row,
                                           int z, int slots) {
  return (int64_t(ti.tok0 + ti.first + row / G) * p.hq + g * G + row % G) * slots + z;
}

// A warp's rows' partial softmax states (m in the log2 domain, l, O / l) -> slot z of workspace ws.
template <int D, int MT>
__device__ void write_partials(const PagedAttentionParams& p, const TileInfo& ti, const RowState<D> (&st)[MT], int g,
                               int G, int rows_used, int row0, const SplitWorkspace& ws, int z) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float l = quad_sum(st[mt].l[i]);
      const int row = row0 + mt * 16 + (lane >> 2) + 8 * i;
      if (row >= rows_used || row / G >= ti.ntok) continue;
      const int64_t part = part_of(p, ti, g, G, row, z, ws.slots);
      const float inv = l > 0.0f ? p.v_scale / l : 0.0f;
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
// with l_s = 0 weighing nothing. The merge is the launch's serial tail: a thread's first
// kMergeBatch partials load together with the splits' (m, l), which a warp a row turns into weights
// by shuffles, so up to kMergeBatch splits merge after one L2 round trip. smem: rows (S + 2) floats
// of scratch (the K/V stages). A cascade suffix pass writes the merged partial (max m, sum of
// weights, out) to its cascade slot.
template <int D, int NT>
__device__ void merge_partials(const PagedAttentionParams& p, const TileInfo& ti, int g, int G, int rows_used, int T,
                               int S, float* smem) {
  static_assert(NT % 32 == 0, "a warp a row");
  static_assert(D % 4 == 0, "the merge reads 4 dims at once");
  static_assert(kMaxDecodeSplits <= 64, "a lane holds two splits' (m, l)");
  __threadfence();  // this CTA's partials are visible before its arrival is counted
  __syncthreads();
  bool arrived_last = false;
  if (threadIdx.x == 0) {
    unsigned* c = p.split_counters + blockIdx.x * gridDim.y + blockIdx.y;
    arrived_last = atomicAdd(c, 1u) == unsigned(S - 1);
    if (arrived_last) *c = 0u;
  }
  // Thread 0's answer to every thread without static shared memory (a decode CTA's dynamic
  // shared memory is exactly a quarter of an SM's, so four fit).
  if (!__syncthreads_or(arrived_last)) return;
  __threadfence();
  const SplitWorkspace ws(p, T);
  const int rows = min(rows_used, ti.ntok * G), items = rows * (D / 4);
  float *w_s = smem, *den = smem + rows * S, *mx_s = den + rows;  // split weights, their sums, max m
  // A thread takes 4 consecutive dims of a row (an item) and reads them from every split with one
  // 16-byte load, kMergeBatch splits' loads in flight at once; the sum runs in split order. A
  // split that saw no key left its partial unwritten: it may be loaded, but it weighs 0 and is
  // never added.
  constexpr int kMergeBatch = 16;
  const bool vec = (reinterpret_cast<uintptr_t>(ws.o) & 15) == 0;
  float4 v[kMergeBatch];
  auto load_batch = [&](int e, int sp0) {
    const int64_t part0 = part_of(p, ti, g, G, e / (D / 4), 0, int(gridDim.z));
    const float* src = ws.o + (part0 + sp0) * D + e % (D / 4) * 4;
#pragma unroll
    for (int u = 0; u < kMergeBatch; ++u) {
      v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (sp0 + u < S)
        v[u] = vec ? __ldcg(reinterpret_cast<const float4*>(src + u * D))
                   : make_float4(__ldcg(src + u * D), __ldcg(src + u * D + 1), __ldcg(src + u * D + 2),
                                 __ldcg(src + u * D + 3));
    }
  };
  if (int(threadIdx.x) < items) load_batch(int(threadIdx.x), 0);
  // The weights: a warp a row, lane l holding splits l and l + 32 (S <= kMaxDecodeSplits).
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  for (int row = warp; row < rows; row += NT / 32) {
    float m[2], l[2];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int sp = lane + 32 * j;
      const int64_t part = part_of(p, ti, g, G, row, sp, int(gridDim.z));
      m[j] = sp < S ? __ldcg(ws.ml + 2 * part) : -INFINITY;
      l[j] = sp < S ? __ldcg(ws.ml + 2 * part + 1) : 0.0f;
      if (l[j] > 0.0f) mx = fmaxf(mx, m[j]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int sp = lane + 32 * j;
      const float w = l[j] > 0.0f ? l[j] * fast_exp2(m[j] - mx) : 0.0f;
      if (sp < S) w_s[row * S + sp] = w;
      sum += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) den[row] = sum, mx_s[row] = mx;
  }
  __syncthreads();
  uint16_t* out = static_cast<uint16_t*>(p.out);
  const bool to_cascade = p.cascade_pass == kCascadeSuffix;
  const SplitWorkspace cw = cascade_partials(p, T);
  for (int e = int(threadIdx.x); e < items; e += NT) {
    const int row = e / (D / 4), d = e % (D / 4) * 4;
    const int64_t part0 = part_of(p, ti, g, G, row, 0, int(gridDim.z));
    const float* w = w_s + row * S;
    float num[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int sp0 = 0; sp0 < S; sp0 += kMergeBatch) {
      if (e != int(threadIdx.x) || sp0 != 0) load_batch(e, sp0);  // the first batch is already in v
#pragma unroll
      for (int u = 0; u < kMergeBatch; ++u) {
        const float wt = sp0 + u < S ? w[sp0 + u] : 0.0f;
        if (wt > 0.0f) {
          num[0] += wt * v[u].x, num[1] += wt * v[u].y;
          num[2] += wt * v[u].z, num[3] += wt * v[u].w;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float o = den[row] > 0.0f ? num[j] / den[row] : 0.0f;
      if (to_cascade) {
        const int64_t part = (part0 / gridDim.z) * cw.slots + cw.slots - 1;
        cw.o[part * D + d + j] = o;
        if (d + j == 0) cw.ml[2 * part] = mx_s[row], cw.ml[2 * part + 1] = den[row];
        continue;
      }
      const __nv_bfloat16 b = __float2bfloat16_rn(o);
      out[(part0 / gridDim.z) * D + d + j] = *reinterpret_cast<const uint16_t*>(&b);
    }
  }
}

// Warp split (decode): every warp of the CTA holds the same 16 rows' softmax state over its own
// K/V tiles. Called by the whole CTA after its last tile: warps 1.. leave their states in
// `scratch` (the K/V stages: (WARPS - 1) x 32 x (D / 2 + 4) floats), and warp 0 folds them into
// its own, in warp order (deterministic): m = max m_w, l = sum l_w 2^(m_w - m), o likewise. Warp
// 0's state is then the CTA's; the others' rows (16 on) are never written out.
template <int D, int WARPS>
__device__ void merge_warps(RowState<D>& st, float* scratch) {
  constexpr int F = D / 2 + 4;  // floats per lane: o, then m, l
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  __syncthreads();  // every warp is done with the K/V stages
  if (warp > 0) {
    float* dst = scratch + (warp - 1) * F * 32 + lane;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
#pragma unroll
      for (int e = 0; e < 4; ++e) dst[(nd * 4 + e) * 32] = st.o[nd][e];
#pragma unroll
    for (int i = 0; i < 2; ++i) dst[(D / 2 + i) * 32] = st.m[i], dst[(D / 2 + 2 + i) * 32] = st.l[i];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = st.m[i];
    for (int w = 1; w < WARPS; ++w) mx = fmaxf(mx, scratch[((w - 1) * F + D / 2 + i) * 32 + lane]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    const float f0 = fast_exp2(st.m[i] - base);
    st.m[i] = mx;
    st.l[i] *= f0;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) st.o[nd][2 * i] *= f0, st.o[nd][2 * i + 1] *= f0;
    for (int w = 1; w < WARPS; ++w) {
      const float* src = scratch + (w - 1) * F * 32 + lane;
      const float f = fast_exp2(src[(D / 2 + i) * 32] - base);  // a warp that saw no key: m = -inf, f = 0
      st.l[i] += f * src[(D / 2 + 2 + i) * 32];
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
        st.o[nd][2 * i] += f * src[(nd * 4 + 2 * i) * 32], st.o[nd][2 * i + 1] += f * src[(nd * 4 + 2 * i + 1) * 32];
    }
  }
}

}  // namespace gs::cuda::tensor_core
