// The sampling kernel's shared memory and its reductions: over a CTA (every thread gets the
// result), then over a thread-block cluster through distributed shared memory, with exact and
// commutative operations so the result does not depend on the cluster's size. Included by
// sampling_kernels.cu only (internal linkage).
#pragma once
#include <cooperative_groups.h>

#include <cfloat>
#include <climits>

#include "sampling/sampling_math.h"
#include "sampling/sampling_rule.h"

namespace gs::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace sampling;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 8;
constexpr int kCandidates = 4096;  // per CTA
constexpr int kDigits = 4;         // a radix select's 8-bit digits of a 32-bit key
constexpr float kNegInf = -INFINITY;
constexpr uint32_t kNoKey = 0;  // order_key of no valid float

struct Shared {
  alignas(16) uint32_t hist[kDigits][256];  // a radix select's histogram of each digit
  alignas(16) uint32_t hist_all[256];       // the current digit's, summed over the cluster
  uint4 picked[kDigits];                    // each digit found: (digit, keys above it, keys counted)
  float f[kWarps];
  int32_t id[kWarps];
  unsigned long long u[kWarps];
  int scan[kWarps];
  // What this CTA contributes to a cluster reduction, read by the others.
  float x_f;
  int32_t x_id;
  unsigned long long x_u;
  uint32_t x_key;
  // The gathered candidates (scaled logit, id).
  int num_candidates;
  float cand_s[kCandidates];
  int32_t cand_id[kCandidates];
  // What the CTAs post (post): each rank's maximum, bound and count of candidates; in rank 0,
  // the candidates of ranks 1.. in a region of kCandidates / C each.
  float in_m[kMaxCluster];
  uint32_t in_bound[kMaxCluster];
  int in_count[kMaxCluster];
  float in_s[kCandidates];
  int32_t in_id[kCandidates];
  // Top logprobs (rank 0 only).
  int top_n;
  int32_t top_ids[kMaxTopLogprobs];
  float top_vals[kMaxTopLogprobs];
};

__device__ __forceinline__ int lane() { return threadIdx.x & 31; }
__device__ __forceinline__ int warp() { return threadIdx.x >> 5; }

// ---- CTA reductions (every thread gets the result) ----

template <typename T, typename Op>
__device__ T warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float block_max(float v, Shared& sh) {
  auto op = [](float a, float b) { return fmaxf(a, b); };
  v = warp_reduce(v, op);
  if (lane() == 0) sh.f[warp()] = v;
  __syncthreads();
  v = kNegInf;
  for (int w = 0; w < kWarps; ++w) v = fmaxf(v, sh.f[w]);
  __syncthreads();
  return v;
}

__device__ float block_sum(float v, Shared& sh) {
  v = warp_reduce(v, [](float a, float b) { return a + b; });
  if (lane() == 0) sh.f[warp()] = v;
  __syncthreads();
  v = 0.0f;
  for (int w = 0; w < kWarps; ++w) v += sh.f[w];
  __syncthreads();
  return v;
}

__device__ unsigned long long block_sum_u64(unsigned long long v, Shared& sh) {
  v = warp_reduce(v, [](unsigned long long a, unsigned long long b) { return a + b; });
  if (lane() == 0) sh.u[warp()] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < kWarps; ++w) v += sh.u[w];
  __syncthreads();
  return v;
}

__device__ uint32_t block_max_u32(uint32_t v, Shared& sh) {
  v = warp_reduce(v, [](uint32_t a, uint32_t b) { return max(a, b); });
  if (lane() == 0) sh.u[warp()] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < kWarps; ++w) v = max(v, uint32_t(sh.u[w]));
  __syncthreads();
  return v;
}

// The best (score, id) of a warp's lanes, in every lane: the higher score, the lower id on
// ties; INT_MAX: none.
__device__ void warp_argmax(float& best, int32_t& id) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (beats(ob, oi, best, id)) best = ob, id = oi;
  }
}

// The same over the CTA; where z is given, it also sums *z over the CTA, in place.
__device__ void block_argmax(float& best, int32_t& id, Shared& sh, unsigned long long* z = nullptr) {
  warp_argmax(best, id);
  if (z) *z = warp_reduce(*z, [](unsigned long long a, unsigned long long b) { return a + b; });
  if (lane() == 0) sh.f[warp()] = best, sh.id[warp()] = id;
  if (z && lane() == 0) sh.u[warp()] = *z;
  __syncthreads();
  best = kNegInf, id = INT_MAX;
  for (int w = 0; w < kWarps; ++w)
    if (beats(sh.f[w], sh.id[w], best, id)) best = sh.f[w], id = sh.id[w];
  if (z) {
    *z = 0;
    for (int w = 0; w < kWarps; ++w) *z += sh.u[w];
  }
  __syncthreads();
}

// Inclusive prefix sum of v over the lanes of a warp, in lane order.
__device__ uint32_t warp_inclusive_scan(uint32_t v) {
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane() >= o) v += n;
  }
  return v;
}

// Exclusive prefix sum of v over the threads in order; *total gets the block's sum.
__device__ int block_exclusive_scan(int v, int* total, Shared& sh) {
  const int incl = int(warp_inclusive_scan(uint32_t(v)));  // v >= 0
  if (lane() == 31) sh.scan[warp()] = incl;
  __syncthreads();
  int before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp()) before += sh.scan[w];
    all += sh.scan[w];
  }
  __syncthreads();
  *total = all;
  return incl - v + before;
}

// ---- Cluster reductions: the CTAs' values, read a lane each ----

struct Cluster {
  cg::cluster_group g;
  int rank, size;
  __device__ Cluster() : g(cg::this_cluster()), rank(int(g.block_rank())), size(int(g.num_blocks())) {}
  // A cluster of one CTA (from 64 rows on) needs only a CTA barrier, without the cluster
  // barrier's memory fence.
  __device__ void sync() {
    if (size == 1)
      __syncthreads();
    else
      g.sync();
  }
  template <typename T>
  __device__ T* at(T* p, int r) {
    return g.map_shared_rank(p, r);
  }
};

// One CTA on its own, where a reduction needs no cluster (the logprobs of rank 0).
struct OneCta {
  int rank = 0, size = 1;
  __device__ void sync() { __syncthreads(); }
  template <typename T>
  __device__ T* at(T* p, int) {
    return p;
  }
};

// Rank r's value at `slot` in lane r of every warp; `none` in the lanes past the cluster.
template <typename T, typename Scope>
__device__ T rank_value(T* slot, Scope& c, T none) {
  return lane() < c.size ? *c.at(slot, lane()) : none;
}

// Each CTA's `v`, through `slot` in its shared memory, combined over the cluster (Scope:
// Cluster, or OneCta where a CTA works alone): every warp reads the CTAs' slots at once, a lane
// each, and folds them. The ops are exact and commutative (max, integer sums), so the result does
// not depend on the cluster's size; `none` is the op's identity.
template <typename T, typename Op, typename Scope>
__device__ T cluster_combine(T v, T none, T* slot, Scope& c, Op op) {
  if (c.size == 1) return v;  // the CTA's value, which every thread has
  if (threadIdx.x == 0) *slot = v;
  c.sync();
  v = warp_reduce(rank_value(slot, c, none), op);
  c.sync();  // every CTA has read every slot before any writes its own again
  return v;
}

__device__ float cluster_max(float v, Shared& sh, Cluster& c) {
  return cluster_combine(block_max(v, sh), kNegInf, &sh.x_f, c, [](float a, float b) { return fmaxf(a, b); });
}

template <typename Scope>
__device__ unsigned long long cluster_sum_u64(unsigned long long v, Shared& sh, Scope& c) {
  return cluster_combine(block_sum_u64(v, sh), 0ull, &sh.x_u, c,
                         [](unsigned long long a, unsigned long long b) { return a + b; });
}

__device__ uint32_t cluster_max_u32(uint32_t v, Shared& sh, Cluster& c) {
  return cluster_combine(block_max_u32(v, sh), 0u, &sh.x_key, c, [](uint32_t a, uint32_t b) { return max(a, b); });
}

// The best (score, id) of the cluster; where z is given, it also sums *z over the cluster, in place.
template <typename Scope>
__device__ int32_t cluster_argmax(float best, int32_t id, Shared& sh, Scope& c, unsigned long long* z = nullptr) {
  block_argmax(best, id, sh, z);
  if (c.size == 1) return id;
  if (threadIdx.x == 0) sh.x_f = best, sh.x_id = id, sh.x_u = z ? *z : 0;
  c.sync();
  best = rank_value(&sh.x_f, c, kNegInf);
  id = rank_value(&sh.x_id, c, INT_MAX);
  warp_argmax(best, id);
  if (z)
    *z = warp_reduce(rank_value(&sh.x_u, c, 0ull), [](unsigned long long a, unsigned long long b) { return a + b; });
  c.sync();
  return id;
}

}  // namespace
}  // namespace gs::cuda
