// The CUDA sampling kernel: one CTA of 1024 threads per row, sorting-free.
//
// Every step of sampling_rule.h is a pass over the row (4 consecutive tokens per thread and
// pass, 16-byte loads, one Philox call per 4 draws) followed by a block reduction:
//   greedy: one argmax pass;  plain temperature: one Gumbel pass (plus the max for min_p);
//   top-k: 4 radix-select passes (8-bit digits of the order-preserving key, per-digit counts
//   aggregated across a warp with __match_any_sync) find the k-th largest s exactly;
//   top-p: Z over the kept set rides on the first Gumbel pass; each rejection round adds one
//   mass pass (about 1 - top_p of the rounds reject). Masses are 32.32 fixed point, so every
//   reduction is exact and the kernel draws what the CPU reference draws on the same logits.
#include <cfloat>
#include <climits>

#include "ops/cuda/launch.cuh"
#include "sampling/cuda/sampling_launch.h"
#include "sampling/sampling_math.h"
#include "sampling/sampling_rule.h"

namespace gs::cuda {
namespace {

using namespace sampling;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr float kNegInf = -INFINITY;

struct Shared {
  uint32_t hist[256];
  float f[kWarps];
  int32_t id[kWarps];
  unsigned long long u[kWarps];
  int scan[kWarps];
  float f_out;
  int32_t id_out;
  unsigned long long u_out;
  int int_out[2];
  int top_n;
  int32_t top_ids[kMaxTopLogprobs];
  float top_vals[kMaxTopLogprobs];
};

__device__ __forceinline__ int lane() { return threadIdx.x & 31; }
__device__ __forceinline__ int warp() { return threadIdx.x >> 5; }

__device__ float block_max(float v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane() == 0) sh.f[warp()] = v;
  __syncthreads();
  if (warp() == 0) {
    v = lane() < kWarps ? sh.f[lane()] : kNegInf;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane() == 0) sh.f_out = v;
  }
  __syncthreads();
  v = sh.f_out;
  __syncthreads();
  return v;
}

__device__ float block_sum(float v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane() == 0) sh.f[warp()] = v;
  __syncthreads();
  if (warp() == 0) {
    v = lane() < kWarps ? sh.f[lane()] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane() == 0) sh.f_out = v;
  }
  __syncthreads();
  v = sh.f_out;
  __syncthreads();
  return v;
}

__device__ unsigned long long block_sum_u64(unsigned long long v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane() == 0) sh.u[warp()] = v;
  __syncthreads();
  if (warp() == 0) {
    v = lane() < kWarps ? sh.u[lane()] : 0ull;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane() == 0) sh.u_out = v;
  }
  __syncthreads();
  v = sh.u_out;
  __syncthreads();
  return v;
}

// The best (score, id) of the block: the higher score, the lower id on ties. INT_MAX: none.
__device__ int32_t block_argmax(float best, int32_t id, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (beats(ob, oi, best, id)) best = ob, id = oi;
  }
  if (lane() == 0) sh.f[warp()] = best, sh.id[warp()] = id;
  __syncthreads();
  if (warp() == 0) {
    best = lane() < kWarps ? sh.f[lane()] : kNegInf;
    id = lane() < kWarps ? sh.id[lane()] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
      if (beats(ob, oi, best, id)) best = ob, id = oi;
    }
    if (lane() == 0) sh.id_out = id;
  }
  __syncthreads();
  id = sh.id_out;
  __syncthreads();
  return id;
}

// Exclusive prefix sum of v over the threads in order; *total gets the block's sum.
__device__ int block_exclusive_scan(int v, int* total, Shared& sh) {
  int incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane() >= o) incl += n;
  }
  if (lane() == 31) sh.scan[warp()] = incl;
  __syncthreads();
  if (warp() == 0) {
    const int w = lane() < kWarps ? sh.scan[lane()] : 0;
    int wi = w;
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane() >= o) wi += n;
    }
    if (lane() < kWarps) sh.scan[lane()] = wi - w;
    if (lane() == 31) sh.int_out[0] = wi;
  }
  __syncthreads();
  const int out = incl - v + sh.scan[warp()];
  *total = sh.int_out[0];
  __syncthreads();
  return out;
}

// Calls f(i0, v) for every group of 4 tokens i0 .. i0 + 3 of the row (NaN past its end), every
// thread the same number of times (so f may use warp collectives).
template <typename F>
__device__ __forceinline__ void for_each4(const float* x, int V, F&& f) {
  const bool vec = (V & 3) == 0;
  for (int base = 0; base < V; base += 4 * kThreads) {
    const int i0 = base + 4 * int(threadIdx.x);
    float v[4];
    if (vec && i0 < V) {
      const float4 q = *reinterpret_cast<const float4*>(x + i0);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = i0 + j < V ? x[i0 + j] : NAN;
    }
    f(i0, v);
  }
}

// argmax of the row (NaN never wins; none: token 0).
__device__ int32_t argmax_row(const float* x, int V, Shared& sh) {
  float best = kNegInf;
  int32_t id = INT_MAX;
  for_each4(x, V, [&](int i0, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j]) && beats(v[j], i0 + j, best, id)) best = v[j], id = i0 + j;
  });
  id = block_argmax(best, id, sh);
  return id == INT_MAX ? 0 : id;
}

// The keys of a pass: raw logits (inv_t = 0) or scaled ones.
struct Keys {
  float inv_t;
  __device__ float value(float v) const { return inv_t == 0.0f ? v : scaled(v, inv_t); }
};

// The k-th largest key among valid tokens with key >= lo (radix select, 8-bit digits), or lo
// when at most k tokens have such keys.
__device__ uint32_t kth_key(const float* x, int V, Keys keys, uint32_t lo, int k, Shared& sh) {
  uint32_t prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for_each4(x, V, [&](int, const float* v) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t key = order_key(keys.value(v[j]));
        const bool in = !isnan(v[j]) && key >= lo && (key & mask) == prefix;
        const int digit = in ? int((key >> shift) & 255u) : 256;
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        if (in && lane() == __ffs(peers) - 1) atomicAdd(&sh.hist[digit], uint32_t(__popc(peers)));
      }
    });
    __syncthreads();
    if (warp() == 0) {  // lane l scans bins 255 - 8 l down to 248 - 8 l
      uint32_t c[8];
      int local = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) local += int(c[b] = sh.hist[255 - 8 * lane() - b]);
      int incl = local;
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane() >= o) incl += n;
      }
      const int total = __shfl_sync(0xffffffffu, incl, 31);
      int run = incl - local;
      if (lane() == 0) sh.int_out[1] = (shift == 24 && total <= remaining) ? 1 : 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        if (run < remaining && run + int(c[b]) >= remaining) sh.int_out[0] = 255 - 8 * lane() - b, sh.top_n = run;
        run += int(c[b]);
      }
    }
    __syncthreads();
    const bool all = sh.int_out[1] != 0;
    const int digit = sh.int_out[0], above = sh.top_n;
    __syncthreads();
    if (all) return lo;
    prefix |= uint32_t(digit) << shift;
    mask |= 0xffu << shift;
    remaining -= above;
  }
  return prefix;
}

// Raw log-sum-exp of the row.
__device__ float log_sum_exp(const float* x, int V, Shared& sh) {
  float mx = kNegInf;
  for_each4(x, V, [&](int, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j])) mx = fmaxf(mx, v[j]);
  });
  mx = block_max(mx, sh);
  if (mx == kNegInf) return kNegInf;
  float sum = 0.0f;
  for_each4(x, V, [&](int, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j])) sum += expf(v[j] - mx);
  });
  return mx + logf(block_sum(sum, sh));
}

// The n best raw logits (by value desc, id asc) and their logprobs.
__device__ void top_logprobs(const float* x, int V, int n, float lse, int32_t* ids, float* lps, Shared& sh) {
  const uint32_t tau = kth_key(x, V, Keys{0.0f}, 0u, n, sh);
  if (threadIdx.x == 0) sh.top_n = 0;
  __syncthreads();
  for_each4(x, V, [&](int i0, const float* v) {  // every key above tau (fewer than n)
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
    int mine = 0;
    for (int j = 0; j < 4; ++j) mine += (i0 + j < V && !isnan(x[i0 + j]) && order_key(x[i0 + j]) == tau) ? 1 : 0;
    int total = 0;
    int pos = have + taken + block_exclusive_scan(mine, &total, sh);
    for (int j = 0; j < 4; ++j)
      if (i0 + j < V && !isnan(x[i0 + j]) && order_key(x[i0 + j]) == tau) {
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

// Step 2 of the rule, in place: penalties over the row, then the sparse adjustments.
__device__ void penalise(float* x, int V, const SamplingRow& r, const SampleArgs& a) {
  if (r.penalty_slot >= 0) {
    const int32_t* counts = a.counts + int64_t(r.penalty_slot) * V;
    const uint32_t* mask = a.prompt_mask + int64_t(r.penalty_slot) * a.mask_words;
    for (int t = threadIdx.x; t < V; t += kThreads) x[t] = apply_penalties(x[t], counts[t], prompt_bit(mask, t), r);
  }
  __syncthreads();
  for (int j = r.adjust_begin + int(threadIdx.x); j < r.adjust_end; j += kThreads) {
    const LogitAdjustment adj = a.adjustments[j];
    if (adj.token >= 0 && adj.token < V) x[adj.token] = add_rn(x[adj.token], adj.value);
  }
  __syncthreads();
}

// Steps 4 and 5 of the rule.
__device__ int32_t draw(const float* x, int V, const SamplingRow& r, Shared& sh) {
  const Keys keys{1.0f / r.temperature};
  float m = kNegInf;
  for_each4(x, V, [&](int, const float* v) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (!isnan(v[j])) m = fmaxf(m, keys.value(v[j]));
  });
  m = block_max(m, sh);
  if (m == kNegInf) return argmax_row(x, V, sh);
  uint32_t lo = order_key(kNegInf) + 1;
  if (r.min_p > 0.0f) lo = max(lo, order_key(add_rn(m, logf(r.min_p))));
  if (r.top_k > 0 && r.top_k < V) lo = max(lo, kth_key(x, V, keys, lo, r.top_k, sh));
  const bool top_p = r.top_p < 1.0f;
  double target = 0.0;
  uint32_t domain = lo;
  for (int round = 0; round < kMaxRounds; ++round) {
    float best = kNegInf;
    int32_t id = INT_MAX;
    unsigned long long z = 0;
    const bool want_z = top_p && round == 0;
    for_each4(x, V, [&](int i0, const float* v) {
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
      if (!any) return;
      const Philox4 d = draws4(r.seed_lo, r.seed_hi, r.step, i0 >> 2);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float score = add_rn(s[j], gumbel(d.v[j]));
        if (in[j] && (id == INT_MAX || beats(score, i0 + j, best, id))) best = score, id = i0 + j;
      }
    });
    const int32_t c = block_argmax(best, id, sh);
    if (want_z) target = double(r.top_p) * double(block_sum_u64(z, sh));
    if (c == INT_MAX) return argmax_row(x, V, sh);  // cannot happen: the top token is in every domain
    if (!top_p) return c;
    const uint32_t kc = order_key(keys.value(x[c]));
    unsigned long long above = 0;
    for_each4(x, V, [&](int, const float* v) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float s = keys.value(v[j]);
        const uint32_t k = order_key(s);
        if (!isnan(v[j]) && k >= lo && k > kc) above += mass_of(s, m);
      }
    });
    if (double(block_sum_u64(above, sh)) < target) return c;
    domain = kc + 1;
  }
  return argmax_row(x, V, sh);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleArgs a) {
  pdl_wait();
  pdl_trigger();
  __shared__ Shared sh;
  const int i = blockIdx.x, V = a.vocab;
  const SamplingRow r = a.rows[i];
  float* x = a.logits + int64_t(i) * V;
  float lse = 0.0f;
  if (r.num_logprobs >= 0) {
    lse = log_sum_exp(x, V, sh);
    if (r.num_logprobs > 0)
      top_logprobs(x, V, min(r.num_logprobs, kMaxTopLogprobs), lse, a.top_ids + i * kMaxTopLogprobs,
                   a.top_logprobs + i * kMaxTopLogprobs, sh);
  }
  const bool modified = r.penalty_slot >= 0 || r.adjust_end > r.adjust_begin;
  if (modified) penalise(x, V, r, a);
  const int32_t c = r.greedy() ? argmax_row(x, V, sh) : draw(x, V, r, sh);
  if (threadIdx.x != 0) return;
  a.sampled[i] = c;
  int32_t* counts = r.penalty_slot >= 0 ? a.counts + int64_t(r.penalty_slot) * V : nullptr;
  if (r.num_logprobs >= 0) {
    float raw = x[c];
    if (modified) {
      float adjustment = 0.0f;
      for (int j = r.adjust_begin; j < r.adjust_end; ++j)
        if (a.adjustments[j].token == c) adjustment = a.adjustments[j].value;
      const bool in_prompt = counts && prompt_bit(a.prompt_mask + int64_t(r.penalty_slot) * a.mask_words, c);
      raw = unapply_penalties(raw, counts ? counts[c] : 0, in_prompt, adjustment, r);
    }
    a.logprob[i] = raw - lse;
  }
  if (counts) ++counts[c];
}

__global__ void __launch_bounds__(kThreads) reset_slot_kernel(SlotArgs a) {
  pdl_wait();
  for (int t = threadIdx.x; t < a.vocab; t += kThreads) a.counts[t] = 0;
  for (int w = threadIdx.x; w < a.mask_words; w += kThreads) a.prompt_mask[w] = 0u;
  __syncthreads();
  for (int j = threadIdx.x; j < a.num_tokens; j += kThreads) {
    const int32_t t = a.tokens[j];
    if (t < 0 || t >= a.vocab) continue;
    if (j < a.num_prompt) atomicOr(&a.prompt_mask[t >> 5], 1u << (t & 31));
    else atomicAdd(&a.counts[t], 1);
  }
}

}  // namespace

cudaError_t sample(const SampleArgs& a, cudaStream_t s) {
  if (a.n <= 0) return cudaSuccess;
  return launch_pdl(sample_kernel, dim3(a.n), dim3(kThreads), 0, s, a);
}

cudaError_t reset_slot(const SlotArgs& a, cudaStream_t s) {
  return launch_pdl(reset_slot_kernel, dim3(1), dim3(kThreads), 0, s, a);
}

}  // namespace gs::cuda
