// The routing kernels, ops/moe.h's rule (the CPU backend's moe_route_token): the same experts, in
// the same order, and weights equal up to the softmax sum's rounding.
// - moe_route_warp: a warp a token, each lane holding the scores of experts lane + 32 i; the
//   picks by warp reductions, one after another. A top-k pick is the first expert of the largest
//   key among those not yet taken; a NaN key never wins, except that the sequential rule keeps
//   the first expert not yet taken when its own key is NaN. Group-limited routings take it.
// - moe_route_rank_kernel: a CTA a token, a thread an expert: each expert's place in the order
//   (larger key first, then the smaller expert) counted against all keys at once, so the k picks
//   cost one pass instead of k dependent reductions; it reads the keys four at a time, several
//   quads in flight (a chain of dependent shared-memory loads a key cost more than the rest of
//   the routing); the softmax's max and sum come from warp 0 as moe_route_warp computes them
//   (the same rounding), and a token with a NaN key is routed by moe_route_warp.
// Both write each pick as moe_local_expert's id (expert parallelism: local ids, kMoeOtherRank),
// once every pick is made: the picks themselves compare global experts.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/moe_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kPer = kMaxMoeExperts / 32;  // experts a lane
constexpr unsigned kAll = 0xffffffffu;

// The better of two (key, expert) candidates: the larger key, then the smaller expert; e < 0 is
// no candidate.
__device__ __forceinline__ void better(float& v, int& e, float v2, int e2) {
  if (e2 >= 0 && (e < 0 || v2 > v || (v2 == v && e2 < e))) v = v2, e = e2;
}

__device__ __forceinline__ void warp_best(float& v, int& e) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) better(v, e, __shfl_xor_sync(kAll, v, o), __shfl_xor_sync(kAll, e, o));
}

// The value of expert `e`'s slot in every lane's register array `a` (from its owner lane).
__device__ __forceinline__ float owner_value(const float (&a)[kPer], int e, int lane) {
  float mine = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + 32 * i == e) mine = a[i];
  return __shfl_sync(kAll, mine, e & 31);
}

// Group-limited selection: keys of experts outside the topk_group best groups become -inf.
// The group keys go through shared memory (`c_smem`, E floats), lane g computing group g's.
__device__ __forceinline__ void mask_groups(const MoeRouting& r, float (&c)[kPer], float* c_smem, int lane) {
  const int E = r.num_experts, G = r.n_group, per = E / G;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + 32 * i < E) c_smem[lane + 32 * i] = c[i];
  __syncwarp();
  float key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // groups lane and lane + 32 (n_group <= 64)
    const int g = lane + 32 * h;
    float a = -INFINITY, b = -INFINITY;
    if (g < G)
      for (int e = g * per; e < (g + 1) * per; ++e) {
        const float v = c_smem[e];
        if (v > a)
          b = a, a = v;
        else if (v > b)
          b = v;
      }
    key[h] = r.group_key == MoeGroupKey::Max ? a : a + b;
  }
  uint64_t kept = 0;
  for (int pick = 0; pick < r.topk_group; ++pick) {
    float bv = 0.0f;
    int bg = -1;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int g = lane + 32 * h;
      if (g < G && !(kept >> g & 1)) better(bv, bg, key[h], g);
    }
    warp_best(bv, bg);
    kept |= uint64_t(1) << bg;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + 32 * i < E && !(kept >> ((lane + 32 * i) / per) & 1)) c[i] = -INFINITY;
  __syncwarp();
}

// The next pick among keys without NaN: the lanes' best (the larger key, then the first expert)
// meet in two warp reductions over order-preserving integer keys.
__device__ __forceinline__ int pick_finite(const float (&c)[kPer], uint32_t taken, int E, int lane) {
  float bv = 0.0f;
  int be = -1;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + 32 * i;
    if (e < E && !(taken >> i & 1) && (be < 0 || c[i] > bv)) bv = c[i], be = e;
  }
  const uint32_t u = __float_as_uint(bv + 0.0f);  // -0 as +0: equal keys tie
  const uint32_t key = be < 0 ? 0u : (u & 0x80000000u ? ~u : u | 0x80000000u);
  const uint32_t top = __reduce_max_sync(kAll, key);
  return int(__reduce_min_sync(kAll, key == top && be >= 0 ? uint32_t(be) : 0xffffffffu));
}

// The next pick by the sequential rule where some key is NaN.
__device__ __forceinline__ int pick_with_nans(const float (&c)[kPer], uint32_t taken, int E, int lane) {
  float bv = 0.0f;
  int be = -1, first = E;  // the best non-NaN key, and the first expert not taken
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + 32 * i;
    if (e >= E || (taken >> i & 1)) continue;
    first = min(first, e);
    if (!isnan(c[i])) better(bv, be, c[i], e);
  }
  warp_best(bv, be);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(kAll, first, o));
  return isnan(owner_value(c, first, lane)) || be < 0 ? first : be;
}

// The softmax's max and sum over l[E] by one warp (lanes hold experts lane + 32 i), as every lane
// sees them; the max is NaN where the first logit is (the sequential max keeps it).
__device__ __forceinline__ void softmax_stats(const float (&v)[kPer], int E, int lane, float& m, float& sum) {
  m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) m = fmaxf(m, v[i]);
  m = warp_max(m);
  if (isnan(__shfl_sync(kAll, v[0], 0))) m = NAN;
  sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) sum += lane + 32 * i < E ? expf(v[i] - m) : 0.0f;
  sum = warp_sum(sum);
}

// Routes token row l[E] into ids[top_k], weights[top_k] with one warp; c_smem: E floats (groups).
__device__ void moe_route_warp(const float* l, const float* bias, const MoeRouting& r, int32_t* ids, float* weights,
                               float* c_smem, int lane) {
  const int E = r.num_experts;
  float s[kPer], c[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) s[i] = lane + 32 * i < E ? l[lane + 32 * i] : -INFINITY;
  if (r.score == MoeScore::Softmax) {
    float m, sum;
    softmax_stats(s, E, lane, m, sum);
#pragma unroll
    for (int i = 0; i < kPer; ++i) s[i] = (lane + 32 * i < E ? expf(s[i] - m) : 0.0f) / sum;
  } else {
#pragma unroll
    for (int i = 0; i < kPer; ++i) s[i] = 1.0f / (1.0f + expf(-s[i]));
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) c[i] = s[i] + (bias && lane + 32 * i < E ? bias[lane + 32 * i] : 0.0f);
  if (r.n_group > 1) mask_groups(r, c, c_smem, lane);

  bool nan_key = false;
#pragma unroll
  for (int i = 0; i < kPer; ++i) nan_key = nan_key || (lane + 32 * i < E && isnan(c[i]));
  nan_key = __any_sync(kAll, nan_key);

  uint32_t taken = 0;  // bit i: this lane's expert lane + 32 i is picked
  float total = 0.0f, mine = 0.0f;
  for (int j = 0; j < r.top_k; ++j) {
    const int pick = nan_key ? pick_with_nans(c, taken, E, lane) : pick_finite(c, taken, E, lane);
    if ((pick & 31) == lane) taken |= 1u << (pick >> 5);
    const float w = owner_value(s, pick, lane);
    total += w;
    if (lane == j) mine = w;
    if (lane == 0) ids[j] = moe_local_expert(r, pick);
  }
  const float f = r.renormalize ? r.scaling / total : r.scaling;
  if (lane < r.top_k) weights[lane] = mine * f;
}

__global__ void __launch_bounds__(kWarps * 32)
    moe_route_kernel(const float* logits, const float* bias, MoeRouting r, int32_t* ids, float* weights, int T_) {
  __shared__ float c_smem[kWarps][kMaxMoeExperts];
  pdl_wait();
  pdl_trigger();
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), tok = int(blockIdx.x) * kWarps + warp;
  if (tok >= T_) return;
  const int64_t E = r.num_experts, k = r.top_k;
  moe_route_warp(logits + tok * E, bias, r, ids + tok * k, weights + tok * k, c_smem[warp], lane);
}

// Routings without groups; blockDim.x: E rounded up to a warp.
__global__ void __launch_bounds__(kMaxMoeExperts)
    moe_route_rank_kernel(const float* logits, const float* bias, MoeRouting r, int32_t* ids, float* weights) {
  __shared__ float4 key4[kMaxMoeExperts / 4];  // -inf past E, to a multiple of 4: never before an expert
  float* const key = reinterpret_cast<float*>(key4);
  __shared__ float picked[kMaxMoeTopK];
  __shared__ float stats[2];
  const int E = r.num_experts, k = r.top_k, e = int(threadIdx.x), lane = e & 31;
  const float b = bias && e < E ? bias[e] : 0.0f;  // a weight: before the wait
  pdl_wait();
  pdl_trigger();
  const float* l = logits + int64_t(blockIdx.x) * E;
  int32_t* const tid = ids + int64_t(blockIdx.x) * k;
  float* const tw = weights + int64_t(blockIdx.x) * k;
  const float x = e < E ? l[e] : 0.0f;  // each thread's logit, in flight with warp 0's loads below
  if (r.score == MoeScore::Softmax && e < 32) {
    float v[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) v[i] = lane + 32 * i < E ? l[lane + 32 * i] : -INFINITY;
    float m, sum;
    softmax_stats(v, E, lane, m, sum);
    if (lane == 0) stats[0] = m, stats[1] = sum;
  }
  const int quads = (E + 3) / 4;
  if (e >= E && e < 4 * quads) key[e] = -INFINITY;
  __syncthreads();
  float s = 0.0f, c = -INFINITY;
  if (e < E) {
    s = r.score == MoeScore::Softmax ? expf(x - stats[0]) / stats[1] : 1.0f / (1.0f + expf(-x));
    c = s + b;
    key[e] = c;
  }
  if (__syncthreads_or(e < E && isnan(c))) {
    if (e < 32) moe_route_warp(l, bias, r, tid, tw, key, lane);
    return;
  }
  int rank = 0;  // the experts ordered before e
  if (e < E) {
#pragma unroll 4
    for (int q = 0; q < quads; ++q) {
      const float4 o = key4[q];
      const int j = 4 * q;
      rank += (o.x > c || (o.x == c && j < e)) + (o.y > c || (o.y == c && j + 1 < e)) +
              (o.z > c || (o.z == c && j + 2 < e)) + (o.w > c || (o.w == c && j + 3 < e));
    }
  }
  if (e < E && rank < k) tid[rank] = moe_local_expert(r, e), picked[rank] = s;
  __syncthreads();
  if (e < k) {
    float total = 0.0f;
    for (int j = 0; j < k; ++j) total += picked[j];
    tw[e] = picked[e] * (r.renormalize ? r.scaling / total : r.scaling);
  }
}

}  // namespace

cudaError_t moe_route(const float* logits, const float* bias, const MoeRouting& r, int32_t* ids, float* weights, int T_,
                      cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  if (r.n_group <= 1)
    return launch_pdl(moe_route_rank_kernel, T_, (r.num_experts + 31) / 32 * 32, 0, s, logits, bias, r, ids, weights);
  return launch_pdl(moe_route_kernel, (T_ + kWarps - 1) / kWarps, kWarps * 32, 0, s, logits, bias, r, ids, weights, T_);
}

}  // namespace gs::cuda
