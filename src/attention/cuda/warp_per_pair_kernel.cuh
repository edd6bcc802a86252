// Large-batch decode attention with one warp per (request, kv head) pair
// (warp_per_pair_decode_attention.cu launches it for decode batches of many pairs at head dim 128).
//
// At large batches the tensor-core decode kernel runs one 4-warp CTA per pair, 4 CTAs an SM: waves
// of a CTA whose time is a chain of dependent steps, not bandwidth. Here a CTA of 4 warps serves
// 4 pairs, each warp on its own: no __syncthreads, so every pair of a large step is in flight at
// once. A warp's lanes form 4 key slots of 8 lanes;
// lane c of a slot holds 16-byte chunks c, c + 8, .. of a D-wide row, so a slot reads one key's K
// and V row per load (128 contiguous bytes at D 64). Each round a slot loads U keys (4 U a warp,
// all K and V loads issued before any is used), the 8 lanes sum each query head's dot product by
// shuffles, and the slot keeps its own online-softmax state (m, l, O over its dims) of the G query
// heads that share the kv head (scores in the log2 domain: Q is scaled by scale x log2 e). The
// 4 slots merge by shuffles at the end and slot 0 writes the rows. The block table's entries are
// read 32 at a time (one per lane) and handed to the key's lanes by shuffle, so a round's loads
// wait on nothing but the round before. Keys at this step's new positions come straight from
// k, v (as in the tensor-core kernel, so no warp waits on a cache write); the warp writes its
// pair's new tokens to the cache. Tokens of a request are done one after another (decode has 1).
// With W = 2 or 4 warps a pair (fewer pairs than SM slots), warp w of a pair takes rounds w,
// w + W, .. and the pair's warps merge their states through shared memory on a named barrier.
// Pairs of the pseudo-request num_reqs_padded (tokens past query_start_loc[num_reqs_padded]) only
// write the cache and zero their output rows. Included only by warp_per_pair_decode_attention.cu.
#pragma once
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "attention/cuda/paged_attention_params.h"
#include "attention/cuda/tensor_core_tile.cuh"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda::warp_per_pair {

constexpr int kWarps = 4;  // pairs (warps) of a CTA
constexpr int kSlots = 4;  // key slots of a warp (8 lanes each)

// D: head dim (64 or 128); GM: most query heads per kv head; U: keys a slot loads per round.
template <int D, int GM, int U>
struct Shape {
  static constexpr int CH = D / 64;  // 16-byte chunks a lane holds of a row
  static constexpr int E = CH * 8;   // elements a lane holds of a row
};

// Sum over the 8 lanes of a key slot.
__device__ __forceinline__ float slot_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v + __shfl_xor_sync(0xffffffffu, v, 4);
}

// A slot's softmax state of GM query heads over its keys (this lane's E dims of O).
template <int GM, int E>
struct SlotState {
  float m[GM], l[GM], o[GM][E];
};

// Moves head h's state to the running maximum mx (l and O scaled by 2^(m - mx)); returns the
// exponent base for the new scores (0 while no key was seen: mx = -inf).
template <int GM, int E>
__device__ __forceinline__ float rescale_to(SlotState<GM, E>& st, int h, float mx) {
  const float base = mx == -INFINITY ? 0.0f : mx;
  const float f = tensor_core::fast_exp2(st.m[h] - base);
  st.m[h] = mx;
  st.l[h] *= f;
#pragma unroll
  for (int e = 0; e < E; ++e) st.o[h][e] *= f;
  return base;
}

// Folds the state of the lane `mask` away (another slot) into st.
template <int GM, int E>
__device__ __forceinline__ void merge_slots(SlotState<GM, E>& st, int mask) {
#pragma unroll
  for (int h = 0; h < GM; ++h) {
    const float mo = __shfl_xor_sync(0xffffffffu, st.m[h], mask);
    const float lo = __shfl_xor_sync(0xffffffffu, st.l[h], mask);
    const float mx = fmaxf(st.m[h], mo);
    const float base = mx == -INFINITY ? 0.0f : mx;
    const float f = tensor_core::fast_exp2(st.m[h] - base), fo = tensor_core::fast_exp2(mo - base);
    st.m[h] = mx;
    st.l[h] = st.l[h] * f + lo * fo;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float oo = __shfl_xor_sync(0xffffffffu, st.o[h][e], mask);
      st.o[h][e] = st.o[h][e] * f + oo * fo;
    }
  }
}

// Named barrier `id` (1..) of `count` threads: the warps of one pair.
__device__ __forceinline__ void pair_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// The W warps of a pair (each over its own rounds) fold their states into warp w = 0's, which
// this returns true on. scratch: (W - 1) x 8 lanes x (GM (E + 2)) floats of the pair; the warps
// of a pair sync on named barrier 1 + (warp / W) (the pair's first warp, id 0 is __syncthreads).
template <int GM, int E>
__device__ bool merge_pair_warps(SlotState<GM, E>& st, int W, int w, float* scratch) {
  constexpr int F = GM * (E + 2);
  const int lane = int(threadIdx.x) & 31, id = 1 + (int(threadIdx.x) >> 5) / W;
  pair_barrier(id, W * 32);  // the previous token's merge is done with scratch
  if (w > 0 && lane < 8) {
    float* dst = scratch + ((w - 1) * 8 + lane) * F;
#pragma unroll
    for (int h = 0; h < GM; ++h) {
      dst[h * (E + 2)] = st.m[h], dst[h * (E + 2) + 1] = st.l[h];
#pragma unroll
      for (int e = 0; e < E; ++e) dst[h * (E + 2) + 2 + e] = st.o[h][e];
    }
  }
  pair_barrier(id, W * 32);
  if (w > 0) return false;
  if (lane >= 8) return true;  // slot 0's lanes write the rows
#pragma unroll
  for (int h = 0; h < GM; ++h) {
    float mx = st.m[h];
    for (int v = 1; v < W; ++v) mx = fmaxf(mx, scratch[((v - 1) * 8 + lane) * F + h * (E + 2)]);
    const float base = rescale_to(st, h, mx);
    for (int v = 1; v < W; ++v) {
      const float* src = scratch + ((v - 1) * 8 + lane) * F + h * (E + 2);
      const float f = tensor_core::fast_exp2(src[0] - base);  // a warp that saw no key: m = -inf, f = 0
      st.l[h] += f * src[1];
#pragma unroll
      for (int e = 0; e < E; ++e) st.o[h][e] += f * src[2 + e];
    }
  }
  return true;
}

// Where key j of kv head g lies: this step's k, v row (j >= new0) or the cache slot of its block
// (`btv`: lane i holds block table entry bt_base + i); element offset of the row's head g.
struct KeySource {
  const uint16_t *kp, *vp;
  int64_t off;
};

// The warp's pair (request r, kv head g): attention of its tokens' G query heads over the
// context, O / l into out. ctx, new0: the request's context and first new position.
template <int D, int GM, int U>
__device__ void attend_pair(const PagedAttentionParams& p, int window, int r, int g, int tok0, int qlen, int ctx,
                            int new0, int W, int w, float* scratch) {
  using S = Shape<D, GM, U>;
  constexpr int CH = S::CH, E = S::E;
  const int lane = int(threadIdx.x) & 31, slot = lane >> 3, c = lane & 7;
  const int G = p.hq / p.hkv;
  const float sl2 = p.scale * 1.4426950408889634f;
  const int32_t* bt = p.block_table + int64_t(r) * p.max_blocks_per_req;
  const int64_t row_stride = int64_t(p.hkv) * D;
  const uint16_t* kc = static_cast<const uint16_t*>(p.k_cache);
  const uint16_t* vc = static_cast<const uint16_t*>(p.v_cache);
  const uint16_t* kn = static_cast<const uint16_t*>(p.k);
  const uint16_t* vn = static_cast<const uint16_t*>(p.v);
  for (int t = 0; t < qlen; ++t) {
    const int q_pos = new0 + t;
    const int kv_end = max(0, min(ctx, q_pos + 1));
    const int kv_begin = window > 0 ? max(0, q_pos - window + 1) : 0;
    float q[GM][E];
    const uint16_t* qrow = static_cast<const uint16_t*>(p.q) + (int64_t(tok0 + t) * p.hq + g * G) * D;
#pragma unroll
    for (int h = 0; h < GM; ++h)
#pragma unroll
      for (int k = 0; k < CH; ++k) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (h < G) v = __ldg(reinterpret_cast<const uint4*>(qrow + h * D + (c + 8 * k) * 8));
        unpack8(v, &q[h][k * 8]);
#pragma unroll
        for (int e = 0; e < 8; ++e) q[h][k * 8 + e] *= sl2;
      }
    SlotState<GM, E> st;
#pragma unroll
    for (int h = 0; h < GM; ++h) {
      st.m[h] = -INFINITY, st.l[h] = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) st.o[h][e] = 0.0f;
    }
    int bt_base = INT_MIN / 2, btv = 0;  // lane i: block table entry bt_base + i
    for (int base = kv_begin + w * kSlots * U; base < kv_end; base += W * kSlots * U) {
      const int last_blk = (min(base + kSlots * U, kv_end) - 1) / p.block_size;
      if (last_blk - bt_base >= 32) {  // warp-uniform: the round's blocks are not all in btv
        bt_base = base / p.block_size;
        const int col = bt_base + lane;
        btv = col < p.max_blocks_per_req && col * p.block_size < ctx ? bt[col] : 0;
        btv = min(max(btv, 0), p.num_blocks - 1);
      }
      uint4 kb[U][CH], vb[U][CH];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = base + u * kSlots + slot;
        const bool ok = j < kv_end;
        const int blk = __shfl_sync(0xffffffffu, btv, (j / p.block_size - bt_base) & 31);
        const uint16_t *kp = kc, *vp = vc;
        int64_t off = (int64_t(blk) * p.block_size + j % p.block_size) * row_stride;
        if (j >= new0) kp = kn, vp = vn, off = int64_t(tok0 + j - new0) * row_stride;
        off += int64_t(g) * D + c * 8;
#pragma unroll
        for (int k = 0; k < CH; ++k) {
          kb[u][k] = ok ? __ldg(reinterpret_cast<const uint4*>(kp + off + k * 64)) : make_uint4(0, 0, 0, 0);
          vb[u][k] = ok ? __ldg(reinterpret_cast<const uint4*>(vp + off + k * 64)) : make_uint4(0, 0, 0, 0);
        }
      }
      float s[U][GM];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float kf[E];
#pragma unroll
        for (int k = 0; k < CH; ++k) unpack8(kb[u][k], &kf[k * 8]);
        const bool ok = base + u * kSlots + slot < kv_end;
#pragma unroll
        for (int h = 0; h < GM; ++h) {
          float d = 0.0f;
#pragma unroll
          for (int e = 0; e < E; ++e) d = fmaf(q[h][e], kf[e], d);
          d = slot_sum(d);
          s[u][h] = ok ? d : -INFINITY;
        }
      }
#pragma unroll
      for (int h = 0; h < GM; ++h) {
        float mx = st.m[h];
#pragma unroll
        for (int u = 0; u < U; ++u) mx = fmaxf(mx, s[u][h]);
        const float b = rescale_to(st, h, mx);
#pragma unroll
        for (int u = 0; u < U; ++u) s[u][h] = tensor_core::fast_exp2(s[u][h] - b), st.l[h] += s[u][h];
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float vf[E];
#pragma unroll
        for (int k = 0; k < CH; ++k) unpack8(vb[u][k], &vf[k * 8]);
#pragma unroll
        for (int h = 0; h < GM; ++h)
#pragma unroll
          for (int e = 0; e < E; ++e) st.o[h][e] = fmaf(s[u][h], vf[e], st.o[h][e]);
      }
    }
    merge_slots(st, 8);
    merge_slots(st, 16);
    if (W > 1 && !merge_pair_warps(st, W, w, scratch)) continue;
    if (slot != 0) continue;
    uint16_t* orow = static_cast<uint16_t*>(p.out) + (int64_t(tok0 + t) * p.hq + g * G) * D;
#pragma unroll
    for (int h = 0; h < GM; ++h) {
      if (h >= G) break;
      const float inv = st.l[h] > 0.0f ? 1.0f / st.l[h] : 0.0f;
#pragma unroll
      for (int k = 0; k < CH; ++k) {
        const float* o = &st.o[h][k * 8];
        const uint4 w =
            make_uint4(tensor_core::pack_bf16(o[0] * inv, o[1] * inv), tensor_core::pack_bf16(o[2] * inv, o[3] * inv),
                       tensor_core::pack_bf16(o[4] * inv, o[5] * inv), tensor_core::pack_bf16(o[6] * inv, o[7] * inv));
        *reinterpret_cast<uint4*>(orow + h * D + (c + 8 * k) * 8) = w;
      }
    }
  }
}

// Grid: ceil((num_reqs_padded + 1) x hkv x W / kWarps) CTAs of kWarps warps; W (1, 2 or 4) warps
// per pair: warp -> pair (request, kv head) = divmod((blockIdx.x kWarps + warp) / W, hkv), and
// w = warp % W takes rounds w, w + W, .. of the pair's keys.
template <int D, int GM, int U>
__global__ void __launch_bounds__(kWarps * 32)
    warp_per_pair_decode_kernel(PagedAttentionParams p, int window, int T, int W) {
  constexpr int F = GM * (Shape<D, GM, U>::E + 2);
  __shared__ float scratch[kWarps * 8 * F];  // warps of a pair, but its first, leave their states here
  pdl_wait();
  pdl_trigger();
  const int warp = int(threadIdx.x) >> 5, w = warp % W;
  const int pair = (int(blockIdx.x) * kWarps + warp) / W;
  const int r = pair / p.hkv, g = pair % p.hkv;
  if (r > p.num_reqs_padded) return;
  const int tok0 = p.query_start_loc[r];
  const int qlen = (r < p.num_reqs_padded ? p.query_start_loc[r + 1] : T) - tok0;
  if (qlen <= 0) return;
  const int lane = int(threadIdx.x) & 31;
  if (w == 0) tensor_core::write_cache_rows<D>(p, tok0, qlen, g, lane, 32);
  if (r == p.num_reqs_padded) {  // tokens of no request: zero rows
    if (w == 0) tensor_core::zero_out_rows<D>(p, tok0, qlen, g, p.hq / p.hkv, lane, 32);
    return;
  }
  const int seq = p.seq_lens[r];
  const int ctx = min(seq, p.max_blocks_per_req * p.block_size);
  attend_pair<D, GM, U>(p, window, r, g, tok0, qlen, ctx, seq - qlen, W, w, scratch + (warp - w) * 8 * F);
}

}  // namespace gs::cuda::warp_per_pair
