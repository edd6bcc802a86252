// The CUDA sampling kernel: one thread-block cluster per row, sorting-free.
//
// A row is split over the C CTAs of a cluster (C = 8 at small batches, so one row keeps 8 SMs
// busy; 1 from 64 rows on); every reduction runs in the CTA, then over the cluster through
// distributed shared memory, with exact and commutative operations, so the result does not
// depend on C. A row's time at small batches is a chain of barriers, so the steps take as few as
// they can. The steps of sampling_rule.h:
//   greedy: one argmax pass;  plain temperature: one Gumbel pass, with no max pass before it;
//   top-k (k <= 1024): each CTA takes the k-th largest of its threads' maxima (two radix
//   digits of it), a lower bound of the row's k-th largest, and gathers its tokens above it
//   into shared memory (a few times k of them; only the threads whose maximum reaches it look);
//   one cluster barrier then posts the CTAs' maxima, bounds, counts and candidates to rank 0.
//   Where every CTA's candidates fit its region of rank 0's inbox, the others leave and rank 0
//   alone finds the exact k-th largest, draws and checks top-p, with CTA barriers instead of
//   cluster ones; else every CTA does that over its own. Larger k, or a gather that overflows,
//   use radix-select passes over the row;
//   top-p or min-p without top-k: on a peaked row (a trained model's) the tokens within
//   kNegligibleBelow of the top, the only ones that weigh or can win, are gathered and drawn
//   from as with top-k, where a sample of the row says they fit; else over the row: the kept
//   set's mass rides on the first Gumbel pass; each rejection round adds one mass pass (about
//   1 - top_p of the rounds reject).
// Masses are 32.32 fixed point and every reduction is exact, so the kernel draws what the CPU
// reference draws on the same logits.
#include <cooperative_groups.h>

#include <cfloat>
#include <climits>

#include "ops/cuda/launch.cuh"
#include "sampling/cuda/sampling_launch.h"
#include "sampling/cuda/sampling_reductions.cuh"
#include "sampling/sampling_math.h"
#include "sampling/sampling_rule.h"

namespace gs::cuda {
namespace {

// ---- Passes over this CTA's slice of the row ----

struct Slice {
  const float* x;  // the row
  int begin, end;  // this CTA's tokens: multiples of 4, except end = V
  int V;

  __device__ static Slice of(const float* x, int V, const Cluster& c) {
    const int chunk = ((V + c.size - 1) / c.size + 3) & ~3;
    const int b = min(V, c.rank * chunk);
    return Slice{x, b, min(V, b + chunk), V};
  }
  // Calls f(i0, v) for every group of 4 tokens i0 .. i0 + 3 (NaN past the slice's end), the same
  // number of times in every thread, in order. kBatch groups are loaded before the first is used
  // (one load in flight a thread leaves a pass latency-bound; 4 spill registers at the 64-register
  // cap of 1024 threads without being faster than 2).
  template <typename F>
  __device__ __forceinline__ void for_each4(F&& f) const {
    constexpr int kBatch = 2;
    for (int base = begin; base < end; base += 4 * kThreads * kBatch) {
      float v[kBatch][4];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) load4(base + 4 * (int(threadIdx.x) + b * kThreads), v[b]);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) f(base + 4 * (int(threadIdx.x) + b * kThreads), v[b]);
    }
  }
  __device__ __forceinline__ void load4(int i0, float (&v)[4]) const {
    if (i0 + 3 < end && (reinterpret_cast<uintptr_t>(x + i0) & 15) == 0) {
      const float4 q = *reinterpret_cast<const float4*>(x + i0);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = i0 + j < end ? x[i0 + j] : NAN;
    }
  }
};

// The keys of a pass: raw logits (inv_t = 0) or scaled ones.
struct Keys {
  float inv_t;
  __device__ float value(float v) const { return inv_t == 0.0f ? v : scaled(v, inv_t); }
};

// argmax of the row, where a NaN logit counts as +inf: the winner is NaN or +inf exactly when
// the row holds one (step 3 of the rule, found without a pass of its own); none: token 0.
template <typename Scope>
__device__ int32_t argmax_row(const Slice& sl, Shared& sh, Scope& c) {
  float best = kNegInf;
  int32_t id = INT_MAX;
  sl.for_each4([&](int i0, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x = isnan(v[j]) && i0 + j < sl.end ? INFINITY : v[j];  // (NaN past the end: padding)
      if (!isnan(x) && beats(x, i0 + j, best, id)) best = x, id = i0 + j;
    }
  });
  id = cluster_argmax(best, id, sh, c);
  return id == INT_MAX ? 0 : id;
}

// The digit of a radix select's round, found by one warp: hist holds the count of each 8-bit
// digit among the keys that match the digits found so far; the digit is the one at which the
// count of keys at or above it first reaches `remaining`, and `above` counts the keys above it
// (digit 0, above 0 where the total stays under remaining). Lane l sums digits 255 - 8l down to
// 248 - 8l; a scan over the lanes finds the lane, which walks its eight.
__device__ uint4 pick_digit(const uint32_t* hist, uint32_t remaining) {
  const int l = lane();
  const uint4 lo4 = *reinterpret_cast<const uint4*>(hist + 248 - 8 * l);
  const uint4 hi4 = *reinterpret_cast<const uint4*>(hist + 252 - 8 * l);
  const uint32_t mine = lo4.x + lo4.y + lo4.z + lo4.w + hi4.x + hi4.y + hi4.z + hi4.w;
  const uint32_t incl = warp_inclusive_scan(mine);
  const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
  const unsigned reached = __ballot_sync(0xffffffffu, incl >= remaining);
  const int finder = reached != 0 ? __ffs(int(reached)) - 1 : 0;
  uint4 out = make_uint4(0u, 0u, total, 0u);
  if (reached != 0 && l == finder) {
    const uint32_t h[8] = {hi4.w, hi4.z, hi4.y, hi4.x, lo4.w, lo4.z, lo4.y, lo4.x};  // digit 255 - 8l - i
    uint32_t at = incl - mine;
    bool found = false;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (!found && at + h[i] >= remaining) out.x = uint32_t(255 - 8 * l - i), out.y = at, found = true;
      at += h[i];
    }
  }
  out.x = __shfl_sync(0xffffffffu, out.x, finder);
  out.y = __shfl_sync(0xffffffffu, out.y, finder);
  return out;  // (in every lane)
}

// The k-th largest key that `visit` offers (it calls add(key) for every key >= lo of this
// CTA's share), or lo when the cluster offers at most k of them. Radix select on 8-bit digits,
// each with a histogram of its own, so none is cleared while a warp may still read it. With
// fewer `rounds` than kDigits, a lower bound of it: its top 8 x rounds bits, the rest 0.
template <typename Visit, typename Scope>
__device__ uint32_t kth_key(Visit&& visit, uint32_t lo, int k, Shared& sh, Scope& c, int rounds = kDigits) {
  c.sync();  // every CTA is done with the histograms of an earlier call
  for (int b = threadIdx.x; b < kDigits * 256; b += kThreads) sh.hist[b / 256][b % 256] = 0;
  __syncthreads();
  uint32_t prefix = 0, mask = 0;
  uint32_t remaining = uint32_t(k);
  for (int round = 0; round < rounds; ++round) {
    const int shift = 24 - 8 * round;
    uint32_t* hist = sh.hist[round];
    visit([&](uint32_t key) {
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    });
    c.sync();
    const uint32_t* counts = hist;
    if (c.size > 1) {  // the cluster's counts
      if (threadIdx.x < 256) {
        uint32_t h = 0;
        for (int r = 0; r < c.size; ++r) h += c.at(hist, r)[threadIdx.x];
        sh.hist_all[threadIdx.x] = h;
      }
      __syncthreads();  // (hist_all is next written after the next round's cluster barrier)
      counts = sh.hist_all;
    }
    if (warp() == 0) {
      const uint4 d = pick_digit(counts, remaining);
      if (lane() == 0) sh.picked[round] = d;
    }
    __syncthreads();
    const uint4 d = sh.picked[round];
    if (round == 0 && d.z <= remaining) return lo;
    prefix |= d.x << shift;
    mask |= 0xffu << shift;
    remaining -= d.y;
  }
  return prefix;
}

// Raw log-sum-exp of the whole row (one CTA).
__device__ float log_sum_exp(const Slice& row, Shared& sh) {
  float mx = kNegInf;
  row.for_each4([&](int, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j])) mx = fmaxf(mx, v[j]);
  });
  mx = block_max(mx, sh);
  if (mx == kNegInf) return kNegInf;
  float sum = 0.0f;
  row.for_each4([&](int, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j])) sum += expf(v[j] - mx);
  });
  return mx + logf(block_sum(sum, sh));
}

// The n best raw logits (by value desc, id asc) and their logprobs (one CTA, the whole row).
__device__ void top_n_logprobs(const Slice& row, int n, float lse, int32_t* ids, float* lps, Shared& sh) {
  const float* x = row.x;
  const int V = row.V;
  OneCta one;
  auto visit = [&](auto&& add) {
    row.for_each4([&](int, const float* v) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (!isnan(v[j])) add(order_key(v[j]));
    });
  };
  const uint32_t tau = kth_key(visit, 1u, n, sh, one);
  if (threadIdx.x == 0) sh.top_n = 0;
  __syncthreads();
  row.for_each4([&](int i0, const float* v) {  // every key above tau (fewer than n)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j]) && order_key(v[j]) > tau) {
        const int p = atomicAdd(&sh.top_n, 1);
        if (p < n) sh.top_ids[p] = i0 + j, sh.top_vals[p] = v[j];
      }
  });
  __syncthreads();
  const int have = min(sh.top_n, n);
  int taken = 0;
  for (int base = 0; base < V && have + taken < n; base += 4 * kThreads) {  // ties at tau, lowest ids first
    const int i0 = base + 4 * int(threadIdx.x);
    auto tie = [&](int i) { return i < V && !isnan(x[i]) && order_key(x[i]) == tau; };
    int mine = 0;
    for (int j = 0; j < 4; ++j) mine += tie(i0 + j) ? 1 : 0;
    int total = 0;
    int pos = have + taken + block_exclusive_scan(mine, &total, sh);
    for (int j = 0; j < 4; ++j)
      if (tie(i0 + j)) {
        if (pos < n) sh.top_ids[pos] = i0 + j, sh.top_vals[pos] = x[i0 + j];
        ++pos;
      }
    taken += total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int m = min(have + taken, n);
    for (int a = 1; a < m; ++a)  // insertion sort by (value desc, id asc)
      for (int b = a; b > 0 && beats(sh.top_vals[b], sh.top_ids[b], sh.top_vals[b - 1], sh.top_ids[b - 1]); --b) {
        const float tv = sh.top_vals[b];
        const int32_t ti = sh.top_ids[b];
        sh.top_vals[b] = sh.top_vals[b - 1], sh.top_ids[b] = sh.top_ids[b - 1];
        sh.top_vals[b - 1] = tv, sh.top_ids[b - 1] = ti;
      }
    for (int a = 0; a < kMaxTopLogprobs; ++a) {
      ids[a] = a < m ? sh.top_ids[a] : -1;
      lps[a] = a < m ? sh.top_vals[a] - lse : kNegInf;
    }
  }
  __syncthreads();
}

__device__ __forceinline__ bool prompt_bit(const uint32_t* mask, int t) { return (mask[t >> 5] >> (t & 31)) & 1u; }

// Step 2 of the rule, in place: penalties over this CTA's slice; then rank 0 applies the
// adjustments (anywhere in the row) once every slice is penalised.
__device__ void penalise(float* x, const Slice& sl, const SamplingRow& r, const SampleArgs& a, Cluster& c) {
  if (r.penalty_slot >= 0) {
    const int32_t* counts = a.counts + int64_t(r.penalty_slot) * a.vocab;
    const uint32_t* mask = a.prompt_mask + int64_t(r.penalty_slot) * a.mask_words;
    for (int t = sl.begin + int(threadIdx.x); t < sl.end; t += kThreads)
      x[t] = apply_penalties(x[t], counts[t], prompt_bit(mask, t), r);
  }
  if (r.bitmask_row >= 0) {  // structured output: tokens outside the grammar's mask
    const uint32_t* allowed = a.bitmask + int64_t(r.bitmask_row) * a.mask_words;
    for (int t = sl.begin + int(threadIdx.x); t < sl.end; t += kThreads)
      if (!prompt_bit(allowed, t)) x[t] = kNegInf;
  }
  c.sync();
  if (c.rank == 0)
    for (int j = r.adjust_begin + int(threadIdx.x); j < r.adjust_end; j += kThreads) {
      const LogitAdjustment adj = a.adjustments[j];
      if (adj.token >= 0 && adj.token < a.vocab) x[adj.token] = add_rn(x[adj.token], adj.value);
    }
  c.sync();
}

// One CTA's share of the draw: either its slice of the row, or the candidates it gathered.
struct Share {
  const Slice& sl;
  Keys keys;
  bool gathered;

  // f(id, s) for every valid token of the share (called in divergent code).
  template <typename F>
  __device__ void each(const Shared& sh, F&& f) const {
    if (gathered) {
      for (int i = threadIdx.x; i < sh.num_candidates; i += kThreads) f(sh.cand_id[i], sh.cand_s[i]);
    } else {
      sl.for_each4([&](int i0, const float* v) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (!isnan(v[j])) f(i0 + j, keys.value(v[j]));
      });
    }
  }
};

// Appends this thread's tokens with key >= lo to the CTA's candidates (their count runs past
// kCandidates where they do not fit).
__device__ void gather_mine(const Slice& sl, Keys keys, uint32_t lo, Shared& sh) {
  sl.for_each4([&](int i0, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float s = keys.value(v[j]);
      if (!isnan(v[j]) && order_key(s) >= lo) {
        const int p = atomicAdd(&sh.num_candidates, 1);
        if (p < kCandidates) sh.cand_s[p] = s, sh.cand_id[p] = i0 + j;
      }
    }
  });
}

// What post gives every CTA: the cluster's maximum and largest bound of those posted, whether
// each CTA's candidates fit its own arrays, and whether they all fit rank 0's inbox and arrays
// (rank 0 then holds them all: pool_in_rank0).
struct Posted {
  float m;
  uint32_t bound;
  bool fits, pooled;
};

// One cluster barrier: each CTA posts its maximum m, its bound and its count of gathered
// candidates (final) to every CTA, and ranks 1.. their candidates to rank 0's inbox where they fit
// their region; then every CTA reads the posts in its own shared memory (so no CTA reads another
// after the barrier, and any may leave). Each slot is written once a launch.
__device__ Posted post(float m, uint32_t bound, Shared& sh, Cluster& c) {
  const int n = sh.num_candidates, region = kCandidates / c.size;
  if (int(threadIdx.x) < c.size) {
    Shared& to = *c.at(&sh, int(threadIdx.x));
    to.in_m[c.rank] = m, to.in_bound[c.rank] = bound, to.in_count[c.rank] = n;
  }
  if (c.rank != 0 && n <= region) {
    Shared& r0 = *c.at(&sh, 0);
    for (int i = threadIdx.x; i < n; i += kThreads)
      r0.in_s[c.rank * region + i] = sh.cand_s[i], r0.in_id[c.rank * region + i] = sh.cand_id[i];
  }
  c.sync();
  const bool mine = lane() < c.size;
  const int count = mine ? sh.in_count[lane()] : 0;
  Posted p;
  p.m = warp_reduce(mine ? sh.in_m[lane()] : kNegInf, [](float x, float y) { return fmaxf(x, y); });
  p.bound = warp_reduce(mine ? sh.in_bound[lane()] : 0u, [](uint32_t x, uint32_t y) { return max(x, y); });
  const int total = warp_reduce(count, [](int x, int y) { return x + y; });
  p.fits = __all_sync(0xffffffffu, count <= kCandidates);
  p.pooled = c.size > 1 && __all_sync(0xffffffffu, lane() == 0 || count <= region) && total <= kCandidates;
  return p;
}

// Rank 0 appends the inbox's candidates to its own (pooled: they fit), so that it finishes the
// draw alone, with CTA barriers instead of cluster ones.
__device__ void pool_in_rank0(int csize, Shared& sh) {
  const int region = kCandidates / csize;
  int at = sh.in_count[0];
  for (int q = 1; q < csize; ++q) {
    const int n = sh.in_count[q];
    for (int i = threadIdx.x; i < n; i += kThreads)
      sh.cand_s[at + i] = sh.in_s[q * region + i], sh.cand_id[at + i] = sh.in_id[q * region + i];
    at += n;
  }
  if (threadIdx.x == 0) sh.num_candidates = at;
  __syncthreads();
}

// The Gumbel draw over tokens i0 .. i0 + 3 (one Philox block), of those with in[j]: the best
// score so far and its token stay in (best, id).
__device__ __forceinline__ void gumbel_max4(const SamplingRow& r, int i0, const float (&s)[4], const bool (&in)[4],
                                            float& best, int32_t& id) {
  const Philox4 d = draws4(r.seed_lo, r.seed_hi, r.step, i0 >> 2);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float score = add_rn(s[j], gumbel(d.v[j]));
    if (in[j] && (id == INT_MAX || beats(score, i0 + j, best, id))) best = score, id = i0 + j;
  }
}

// Step 4's top-k threshold over `share` (raising lo), then step 5's draw with the top-p
// rejection rounds, over the scope's CTAs; sl: what argmax_row falls back to (each CTA's slice,
// or the whole row for one CTA).
template <typename Scope>
__device__ int32_t select_and_draw(const Slice& sl, const Share& share, const SamplingRow& r, float m, uint32_t lo,
                                   Shared& sh, Scope& c) {
  if (r.top_k > 0 && r.top_k < sl.V) {
    auto visit = [&](auto&& add) {
      share.each(sh, [&](int32_t, float s) {
        const uint32_t k = order_key(s);
        if (k >= lo) add(k);
      });
    };
    lo = max(lo, kth_key(visit, lo, r.top_k, sh, c));
  }
  const Keys keys = share.keys;
  const bool top_p = r.top_p < 1.0f;
  double target = 0.0;
  uint32_t domain = lo;
  for (int round = 0; round < kMaxRounds; ++round) {
    float best = kNegInf;
    int32_t id = INT_MAX;
    unsigned long long z = 0;
    const bool want_z = top_p && round == 0;
    if (share.gathered) {
      share.each(sh, [&](int32_t t, float s) {
        const uint32_t k = order_key(s);
        if (want_z && k >= lo) z += mass_of(s, m);
        if (k < domain) return;
        const float score = add_rn(s, gumbel(draws4(r.seed_lo, r.seed_hi, r.step, t >> 2).v[t & 3]));
        if (id == INT_MAX || beats(score, t, best, id)) best = score, id = t;
      });
    } else {
      sl.for_each4([&](int i0, const float* v) {
        float s[4];
        bool in[4], any = false;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[j] = keys.value(v[j]);
          const uint32_t k = order_key(s[j]);
          const bool valid = !isnan(v[j]);
          if (want_z && valid && k >= lo) z += mass_of(s[j], m);
          in[j] = valid && k >= domain;
          any |= in[j];
        }
        if (any) gumbel_max4(r, i0, s, in, best, id);
      });
    }
    const int32_t winner = cluster_argmax(best, id, sh, c, want_z ? &z : nullptr);
    if (want_z) target = double(r.top_p) * double(z);
    if (winner == INT_MAX) return argmax_row(sl, sh, c);  // cannot happen: the top token is in every domain
    if (!top_p) return winner;
    const uint32_t kc = order_key(keys.value(sl.x[winner]));
    unsigned long long above = 0;
    share.each(sh, [&](int32_t, float s) {
      const uint32_t k = order_key(s);
      if (k >= lo && k > kc) above += mass_of(s, m);
    });
    if (double(cluster_sum_u64(above, sh, c)) < target) return winner;
    domain = kc + 1;
  }
  return argmax_row(sl, sh, c);
}

// Whether this row's tokens with key >= from likely fit the cluster's gathered candidates (half of
// them at most): one token in kStride of each slice, counted over the cluster. Only which path
// the draw takes depends on it.
__device__ bool likely_fit(const Slice& sl, Keys keys, uint32_t from, Shared& sh, Cluster& c) {
  constexpr int kStride = 64;
  unsigned long long hits = 0;
  for (int i = sl.begin + int(threadIdx.x) * kStride; i < sl.end; i += kThreads * kStride) {
    const float v = sl.x[i];
    if (!isnan(v) && order_key(keys.value(v)) >= from) ++hits;
  }
  return cluster_sum_u64(hits, sh, c) * kStride <= static_cast<unsigned long long>(c.size) * kCandidates / 2;
}

// Plain temperature (no top-k, top-p or min-p) needs no maximum: one pass draws over the
// tokens above -inf and notes a NaN logit or a scaled +inf, where step 3 (or, for a scaled value
// past the float range, the raw argmax) takes over, as in draw().
__device__ int32_t draw_plain(const Slice& sl, Keys keys, const SamplingRow& r, Shared& sh, Cluster& c) {
  float best = kNegInf;
  int32_t id = INT_MAX;
  uint32_t argmax_instead = 0;
  sl.for_each4([&](int i0, const float* v) {
    float s[4];
    bool in[4], any = false;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[j] = keys.value(v[j]);
      if (i0 + j < sl.end && (isnan(v[j]) || s[j] == INFINITY)) argmax_instead = 1;
      in[j] = !isnan(v[j]) && s[j] != kNegInf;
      any |= in[j];
    }
    if (any) gumbel_max4(r, i0, s, in, best, id);
  });
  const int32_t winner = cluster_argmax(best, id, sh, c);
  if (cluster_max_u32(argmax_instead, sh, c) != 0 || winner == INT_MAX) return argmax_row(sl, sh, c);
  return winner;
}

// Steps 4 and 5 of the rule. With top-k, or top-p / min-p alone on a peaked row, rank 0 alone
// finishes from the gathered candidates of every CTA where they fit in its shared memory (the
// other CTAs return no token then).
__device__ int32_t draw(const Slice& sl, const SamplingRow& r, Shared& sh, Cluster& c) {
  const Keys keys{1.0f / r.temperature};
  const bool top_k = r.top_k > 0 && r.top_k < sl.V;
  if (!top_k && !(r.top_p < 1.0f) && !(r.min_p > 0.0f)) return draw_plain(sl, keys, r, sh, c);
  float tmax = kNegInf;  // +inf when the slice holds a NaN or +inf logit
  sl.for_each4([&](int i0, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (i0 + j < sl.end && (isnan(v[j]) || v[j] == INFINITY)) tmax = INFINITY;
      if (!isnan(v[j])) tmax = fmaxf(tmax, keys.value(v[j]));
    }
  });
  const uint32_t any = order_key(kNegInf) + 1;  // the lowest key of a value above -inf
  // Top-k (k <= kThreads): the k-th largest of a CTA's thread maxima is at most the row's k-th
  // largest. Each CTA gathers its tokens at or above its own such bound (only threads whose
  // maximum reaches it hold any) before m is known, so that one post to rank 0 carries the CTAs'
  // maxima, bounds, counts and candidates. Two digits of the bound suffice: it only needs to be
  // a lower bound.
  const bool bounded = top_k && r.top_k <= kThreads;
  if (threadIdx.x == 0) sh.num_candidates = 0;
  Posted p{};
  bool gathered = false;
  float m;
  if (bounded) {
    const uint32_t mine = tmax == kNegInf ? kNoKey : order_key(tmax);
    auto own = [&](auto&& add) {
      if (mine >= any) add(mine);
    };
    OneCta cta;
    const uint32_t bound = max(any, kth_key(own, any, r.top_k, sh, cta, 2));
    if (mine >= bound) gather_mine(sl, keys, bound, sh);
    p = post(block_max(tmax, sh), bound, sh, c);  // (block_max's barriers end the gather)
    m = p.m;
    gathered = p.fits;
  } else {
    m = cluster_max(tmax, sh, c);
  }
  if (m == kNegInf || m == INFINITY) return argmax_row(sl, sh, c);  // nothing to draw, or step 3's sentinel
  uint32_t lo = any;
  if (r.min_p > 0.0f) lo = max(lo, order_key(add_rn(m, logf(r.min_p))));
  if (bounded) {
    lo = max(lo, p.bound);  // no kept token lies below it
  } else if (!top_k) {      // top-p or min-p: the tokens that weigh or can win, where they fit
    const uint32_t from = max(lo, order_key(negligible_below(m)));
    if (likely_fit(sl, keys, from, sh, c)) {
      gather_mine(sl, keys, from, sh);
      __syncthreads();
      p = post(m, 0u, sh, c);
      gathered = p.fits;
    }
  }
  if (gathered && p.pooled) {
    if (c.rank != 0) return INT_MAX;
    pool_in_rank0(c.size, sh);
    OneCta cta;
    const Slice row{sl.x, 0, sl.V, sl.V};
    return select_and_draw(row, Share{row, keys, true}, r, m, lo, sh, cta);
  }
  return select_and_draw(sl, Share{sl, keys, gathered}, r, m, lo, sh, c);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleArgs a) {
  Cluster c;
  // A CTA may write into another's shared memory (post) only once every CTA of the cluster has
  // started: a cluster barrier, whose arrival comes before the wait on the previous kernel so
  // that the wait hides it.
  if (c.size > 1) __cluster_barrier_arrive_relaxed();
  pdl_wait();
  pdl_trigger();
  if (c.size > 1) __cluster_barrier_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  Shared& sh = *reinterpret_cast<Shared*>(smem);
  const int i = int(blockIdx.x) / c.size;
  const SamplingRow r = a.rows[i];
  float* x = a.logits + int64_t(i) * a.vocab;
  const Slice sl = Slice::of(x, a.vocab, c);
  float lse = 0.0f;
  if (r.num_logprobs >= 0) {  // of the raw row, by rank 0, before any CTA penalises it
    if (c.rank == 0) {
      const Slice row{x, 0, a.vocab, a.vocab};
      lse = log_sum_exp(row, sh);
      if (r.num_logprobs > 0)
        top_n_logprobs(row, min(r.num_logprobs, kMaxTopLogprobs), lse, a.top_ids + i * kMaxTopLogprobs,
                       a.top_lps + i * kMaxTopLogprobs, sh);
    }
    c.sync();
  }
  const bool modified = r.penalty_slot >= 0 || r.adjust_end > r.adjust_begin || r.bitmask_row >= 0;
  if (modified) penalise(x, sl, r, a, c);
  const int32_t tok = r.greedy() ? argmax_row(sl, sh, c) : draw(sl, r, sh, c);
  if (c.rank != 0 || threadIdx.x != 0) return;
  const float best = x[tok];  // NaN or +inf when the row holds one; -inf when every logit is -inf
  if (isnan(best) || best == INFINITY || best == kNegInf) {
    a.sampled[i] = best == kNegInf ? kNoSampleableToken : kNonFiniteLogits;
    return;
  }
  a.sampled[i] = tok;
  int32_t* counts = r.penalty_slot >= 0 ? a.counts + int64_t(r.penalty_slot) * a.vocab : nullptr;
  if (r.num_logprobs >= 0 && r.target_token >= 0 && r.target_token < a.vocab) {
    a.logprob[i] = x[r.target_token] - lse;  // (rows with a target have no penalties)
  } else if (r.num_logprobs >= 0) {
    float raw = x[tok];
    if (modified) {
      float adjustment = 0.0f;
      for (int j = r.adjust_begin; j < r.adjust_end; ++j)
        if (a.adjustments[j].token == tok) adjustment = a.adjustments[j].value;
      const bool in_prompt = counts && prompt_bit(a.prompt_mask + int64_t(r.penalty_slot) * a.mask_words, tok);
      raw = unapply_penalties(raw, counts ? counts[tok] : 0, in_prompt, adjustment, r);
    }
    a.logprob[i] = raw - lse;
  }
  if (counts) ++counts[tok];
}

__global__ void __launch_bounds__(kThreads) reset_slot_kernel(SlotArgs a) {
  pdl_wait();
  for (int t = threadIdx.x; t < a.vocab; t += kThreads) a.counts[t] = 0;
  for (int w = threadIdx.x; w < a.mask_words; w += kThreads) a.prompt_mask[w] = 0u;
  __syncthreads();
  for (int j = threadIdx.x; j < a.num_tokens; j += kThreads) {
    const int32_t t = a.tokens[j];
    if (t < 0 || t >= a.vocab) continue;
    if (j < a.num_prompt)
      atomicOr(&a.prompt_mask[t >> 5], 1u << (t & 31));
    else
      atomicAdd(&a.counts[t], 1);
  }
}

// CTAs per row: enough rows x CTAs to cover the GPU's ~132 SMs, at most a portable cluster.
int cluster_size(int rows) { return rows >= 64 ? 1 : rows >= 32 ? 2 : rows >= 16 ? 4 : kMaxCluster; }

}  // namespace

cudaError_t sample(const SampleArgs& a, cudaStream_t s) {
  if (a.n <= 0) return cudaSuccess;
  if (cudaError_t e =
          cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(Shared)));
      e != cudaSuccess)
    return e;
  const int C = cluster_size(a.n);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(a.n * C));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = sizeof(Shared);
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = unsigned(C);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  return cudaLaunchKernelEx(&cfg, sample_kernel, a);
}

cudaError_t reset_slot(const SlotArgs& a, cudaStream_t s) {
  return launch_pdl(reset_slot_kernel, dim3(1), dim3(kThreads), 0, s, a);
}

}  // namespace gs::cuda
