// Flash-decoding paged attention: one CTA per (query token, kv head, group of up to 8 query heads, context
// split), whose four warps each take 32-key chunks of its part of the causal context (one key
// per lane for q.k, lanes split the head dim for p.v), merged at the end with the
// online-softmax rule. With one split the CTA writes the output; with several (flash-decoding,
// for small batches whose few CTAs would leave the GPU idle) each writes its normalised partial
// output and (max, sum), and the last of them to finish (an atomic counter) merges them. The
// same kernel writes the new tokens' k, v into the paged cache and reads those positions from
// k, v directly: one graph node per layer instead of three (cache write, attention, combine). Prefill, decode and mixed
// batches run the same kernel; it reads every per-batch value from device buffers. Attention sinks
// (p.sinks, gpt-oss) join the final normalisation's denominator: the only kernel that has them.
#include <cfloat>

#include "attention/cuda/find_request.cuh"
#include "attention/cuda/flash_decoding_attention.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kGroup = 8;  // query heads per CTA (GQA group, split when larger)
// Splits: up to kSplitsPerContext CTAs per context, aiming at kSplitCtas CTAs in all (about two per
// SM). More splits speed up long contexts but slow down short ones inside FULL graphs, whose split
// count follows the block table's reach (max_model_len), not the actual context. The workspace,
// counters and shared arrays are sized for up to kMaxSplits and kSplitTarget (the tensor-core
// decode kernels share the workspace).
constexpr int kSplitsPerContext = 16;
constexpr int kSplitCtas = 256;
constexpr int kMaxSplits = 64;
constexpr int kSplitTarget = 512;
static_assert(kSplitTarget <= kSplitCounters, "a split launch needs up to kSplitTarget arrival counters");

// q.k of one key row; every 16-byte load of the row is issued before the first use.
template <typename T, int MAXD>
__device__ __forceinline__ float dot_row(const T* kp, const float* qs, int D) {
  constexpr int V = kVecElems<T>;
  float s = 0.0f;
  if (D % V == 0) {
    uint4 kv[MAXD / V];
#pragma unroll
    for (int c = 0; c < MAXD / V; ++c)
      if (c * V < D) kv[c] = *reinterpret_cast<const uint4*>(kp + c * V);
#pragma unroll
    for (int c = 0; c < MAXD / V; ++c) {
      if (c * V >= D) break;
      float kf[V];
      unpack_vec<T>(kv[c], kf);
#pragma unroll
      for (int j = 0; j < V; ++j) s = fmaf(qs[c * V + j], kf[j], s);
    }
  } else {
    for (int d = 0; d < D; ++d) s = fmaf(qs[d], to_f(kp[d]), s);
  }
  return s;
}

// Head g of token t's new k, v -> its cache slot (one CTA per (token, kv head) does this).
template <typename T>
__device__ __forceinline__ void write_cache(const PagedAttentionParams& p, int t, int g, int64_t row) {
  const int64_t slot = p.slot_mapping[t];
  if (slot < 0 || slot >= p.num_slots) return;
  const int64_t src = int64_t(t) * row + int64_t(g) * p.D, dst = slot * row + int64_t(g) * p.D;
  for (int i = threadIdx.x; i < p.D; i += blockDim.x) {
    static_cast<T*>(p.k_cache)[dst + i] = static_cast<const T*>(p.k)[src + i];
    static_cast<T*>(p.v_cache)[dst + i] = static_cast<const T*>(p.v)[src + i];
  }
}

// Called by every CTA of a split launch after it wrote its partial states (block-uniform). The
// last CTA of its (token, head group) to arrive merges the S partials of each of its nh heads:
// out = sum_s w_s o_s / sum_s w_s with w_s = l_s exp(m_s - max m) (splits with l_s = 0 are
// empty), and resets the counter for the next launch.
template <typename T>
__device__ void finish_split(const PagedAttentionParams& p, const float* ml, const float* pacc, T* out, int t, int h0,
                             int nh, int S) {
  __shared__ bool last;
  __threadfence();  // this CTA's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* c = p.split_counters + int64_t(t) * gridDim.y + blockIdx.y;
    last = atomicAdd(c, 1u) == unsigned(S - 1);
    if (last) *c = 0u;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Weights of every (head, split) first, in parallel, so each output element is one pass of
  // independent loads rather than a serial chain of L2 loads.
  __shared__ float m_w[kGroup][kMaxSplits], l_w[kGroup][kMaxSplits], den_w[kGroup];
  const int D = p.D;
  const int64_t base0 = (int64_t(t) * p.hq + h0) * S;  // partial (t, h0, split 0)
  for (int i = threadIdx.x; i < nh * S; i += blockDim.x) {
    const int h = i / S, sp = i % S;
    m_w[h][sp] = __ldcg(ml + 2 * (base0 + int64_t(h) * S + sp));
    l_w[h][sp] = __ldcg(ml + 2 * (base0 + int64_t(h) * S + sp) + 1);
  }
  __syncthreads();
  if (threadIdx.x < nh) {
    const int h = threadIdx.x;
    float mx = -FLT_MAX, den = 0.0f;
    for (int sp = 0; sp < S; ++sp)
      if (l_w[h][sp] > 0.0f) mx = fmaxf(mx, m_w[h][sp]);
    for (int sp = 0; sp < S; ++sp) {
      const float w = l_w[h][sp] > 0.0f ? l_w[h][sp] * __expf(m_w[h][sp] - mx) : 0.0f;
      l_w[h][sp] = w;  // now the split's weight; 0 for empty splits
      den += w;
    }
    if (p.sinks) den += __expf(p.sinks[h0 + h] - mx);  // the sink joins the denominator only
    den_w[h] = den;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < nh * D; e += blockDim.x) {
    const int h = e / D, d = e % D;
    const float* pa = pacc + (base0 + int64_t(h) * S) * D + d;
    float num = 0.0f;
#pragma unroll 16
    for (int sp = 0; sp < S; ++sp) {  // empty splits (unwritten) weigh 0 and are not read
      const float w = l_w[h][sp];
      const float v = w > 0.0f ? __ldcg(pa + int64_t(sp) * D) : 0.0f;
      num += w * v;
    }
    out[e] = from_f<T>(den_w[h] > 0.0f ? num / den_w[h] : 0.0f);
  }
}

// Keys of the p.v step whose V elements are loaded together (64 loads in flight per lane).
template <int DPL>
constexpr int kVBatch = DPL <= 2 ? 32 : 64 / DPL;

template <typename T, int DPL, bool SPLIT>  // head dims per lane: D <= 32 * DPL
__global__ void __launch_bounds__(kWarps * 32) flash_decoding_kernel(PagedAttentionParams p) {
  constexpr int MAXD = 32 * DPL;
  // Many V loads in flight only where the grid is small (split path); elsewhere the registers
  // they cost would halve occupancy.
  constexpr int VB = SPLIT ? kVBatch<DPL> : 8;
  __shared__ float q_s[kGroup][MAXD];
  __shared__ float m_s[kWarps][kGroup], l_s[kWarps][kGroup];
  __shared__ float acc_s[kWarps][kGroup][MAXD];
  pdl_wait();
  pdl_trigger();

  const int t = blockIdx.x, D = p.D;
  const int G = p.hq / p.hkv, chunks = (G + kGroup - 1) / kGroup;
  const int g = blockIdx.y / chunks;
  const int h0 = g * G + (blockIdx.y % chunks) * kGroup;
  const int nh = min(kGroup, g * G + G - h0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = gridDim.z, z = blockIdx.z;
  T* out = static_cast<T*>(p.out) + (int64_t(t) * p.hq + h0) * D;
  // Split-path partial states of (token t, head h0 + h, split z): m, l, then D outputs.
  const int64_t part0 = (int64_t(t) * p.hq + h0) * S + z;
  float* ml = p.split_workspace;
  float* pacc = p.split_workspace + 2 * int64_t(gridDim.x) * p.hq * S;

  const int64_t row = int64_t(p.hkv) * D;
  if (blockIdx.y % chunks == 0 && z == 0) write_cache<T>(p, t, g, row);

  const int r = find_request(p.query_start_loc, p.num_reqs_padded, t);
  int limit = 0, new0 = 0, tok0 = 0;  // positions >= new0 are tokens tok0 + (j - new0) of k, v
  if (r < p.num_reqs_padded && t < p.query_start_loc[r + 1]) {
    const int qlen = p.query_start_loc[r + 1] - p.query_start_loc[r];
    const int ctx = min(p.seq_lens[r], p.max_blocks_per_req * p.block_size);
    new0 = p.seq_lens[r] - qlen;
    tok0 = p.query_start_loc[r];
    limit = min(ctx, new0 + (t - tok0) + 1);
  }
  // Sliding window: only the last `window` positions (HF: key > query - window).
  const int first = p.window > 0 ? max(0, limit - p.window) : 0;
  int begin = first, end = max(limit, 0);
  if (SPLIT) {  // even parts of whole 32-key chunks; trailing splits may be empty
    const int per = max(32, ((end - first + S - 1) / S + 31) / 32 * 32);
    begin = min(end, first + z * per);
    end = min(end, begin + per);
  }
  if (end <= begin) {
    if (SPLIT) {
      for (int h = threadIdx.x; h < nh; h += blockDim.x) ml[2 * (part0 + int64_t(h) * S) + 1] = 0.0f;
      finish_split<T>(p, ml, pacc, out, t, h0, nh, S);
    } else {
      for (int i = threadIdx.x; i < nh * D; i += blockDim.x) out[i] = from_f<T>(0.0f);
    }
    return;
  }
  const T* qp = static_cast<const T*>(p.q) + (int64_t(t) * p.hq + h0) * D;
  for (int i = threadIdx.x; i < nh * D; i += blockDim.x) q_s[i / D][i % D] = to_f(qp[i]) * p.scale;
  __syncthreads();

  const int32_t* bt = p.block_table + int64_t(r) * p.max_blocks_per_req;
  const T* kc = static_cast<const T*>(p.k_cache) + int64_t(g) * D;
  const T* vc = static_cast<const T*>(p.v_cache) + int64_t(g) * D;
  const T* kn = static_cast<const T*>(p.k) + int64_t(g) * D;
  const T* vn = static_cast<const T*>(p.v) + int64_t(g) * D;
  float m[kGroup], l[kGroup], acc[kGroup][DPL];
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    m[h] = -FLT_MAX;
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[h][i] = 0.0f;
  }

  for (int base = begin + warp * 32; base < end; base += kWarps * 32) {
    const int j = base + lane;
    const bool valid = j < end;
    int64_t off = 0;  // row offset of key j in the cache, or in k, v for a new position
    const bool fresh = valid && j >= new0;
    if (fresh) {
      off = int64_t(tok0 + (j - new0)) * row;
    } else if (valid) {
      const int blk = min(max(bt[j / p.block_size], 0), p.num_blocks - 1);
      off = (int64_t(blk) * p.block_size + j % p.block_size) * row;
    }
    const T* kp = (fresh ? kn : kc) + off;
    const unsigned long long vrow = reinterpret_cast<unsigned long long>((fresh ? vn : vc) + off);
    float pr[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h >= nh) break;
      float s = valid ? dot_row<T, MAXD>(kp, q_s[h], D) : -FLT_MAX;
      if (p.softcap > 0.0f && valid) s = p.softcap * tanhf(s / p.softcap);
      const float mn = fmaxf(m[h], warp_max(s));
      const float corr = __expf(m[h] - mn);
      pr[h] = valid ? __expf(s - mn) : 0.0f;
      l[h] = l[h] * corr + warp_sum(pr[h]);
      m[h] = mn;
#pragma unroll
      for (int i = 0; i < DPL; ++i) acc[h][i] *= corr;
    }
    // p.v in batches of VB keys, each batch's loads issued before its FMAs.
    const int n = min(32, end - base);
    for (int j0 = 0; j0 < n; j0 += VB) {
      float vv[VB][DPL];
#pragma unroll
      for (int b = 0; b < VB; ++b) {
        const T* vp = reinterpret_cast<const T*>(__shfl_sync(0xffffffffu, vrow, (j0 + b) & 31));
#pragma unroll
        for (int i = 0; i < DPL; ++i) vv[b][i] = (j0 + b < n && lane + 32 * i < D) ? to_f(vp[lane + 32 * i]) : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < kGroup; ++h) {
        if (h >= nh) break;
#pragma unroll
        for (int b = 0; b < VB; ++b) {
          const float pj = __shfl_sync(0xffffffffu, pr[h], (j0 + b) & 31);
#pragma unroll
          for (int i = 0; i < DPL; ++i) acc[h][i] = fmaf(pj, vv[b][i], acc[h][i]);
        }
      }
    }
  }

  // Merge the warps' partial softmax states.
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    if (lane == 0) {
      m_s[warp][h] = m[h];
      l_s[warp][h] = l[h];
    }
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc_s[warp][h][lane + 32 * i] = acc[h][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < nh * D; e += blockDim.x) {
    const int h = e / D, d = e % D;
    float mx = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][h]);
    float den = 0.0f, num = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float c = l_s[w][h] > 0.0f ? __expf(m_s[w][h] - mx) : 0.0f;
      den += l_s[w][h] * c;
      num += acc_s[w][h][d] * c;
    }
    if (!SPLIT && p.sinks) den += __expf(p.sinks[h0 + h] - mx);  // split partials: finish_split adds it
    const float o = den > 0.0f ? num / den : 0.0f;
    if (SPLIT) {
      const int64_t part = part0 + int64_t(h) * S;
      pacc[part * D + d] = o;
      if (d == 0) ml[2 * part] = mx, ml[2 * part + 1] = den;
    } else {
      out[e] = from_f<T>(o);
    }
  }
  if (SPLIT) finish_split<T>(p, ml, pacc, out, t, h0, nh, S);
}

template <typename T, int DPL>
cudaError_t launch(const PagedAttentionParams& p, int T_, int S, cudaStream_t s) {
  const int G = p.hq / p.hkv;
  const dim3 grid(unsigned(T_), unsigned(p.hkv * ((G + kGroup - 1) / kGroup)), unsigned(S));
  return launch_pdl(S == 1 ? flash_decoding_kernel<T, DPL, false> : flash_decoding_kernel<T, DPL, true>, grid,
                    kWarps * 32, 0, s, p);
}

template <typename T>
cudaError_t dispatch(const PagedAttentionParams& p, int T_, int S, cudaStream_t s) {
  if (p.D <= 64) return launch<T, 2>(p, T_, S, s);
  if (p.D <= 128) return launch<T, 4>(p, T_, S, s);
  if (p.D <= kMaxAttentionHeadDim) return launch<T, 8>(p, T_, S, s);
  return cudaErrorInvalidValue;
}

}  // namespace

size_t split_workspace_floats(int D) {
  // T * groups * S < 2 * kSplitTarget whenever S > 1 (see attention_splits), and each group
  // holds at most kGroup heads of D outputs plus (m, l).
  return size_t(2) * kSplitTarget * kGroup * size_t(D + 2);
}

int attention_splits(int T, int hq, int hkv, int max_context) {
  const int G = hq / hkv;
  const int base = T * hkv * ((G + kGroup - 1) / kGroup);
  const int target = kSplitCtas, most = kSplitsPerContext;
  if (base <= 0 || base >= target) return 1;
  int S = (target + base - 1) / base;
  S = S < most ? S : most;
  const int by_ctx = (max_context + 31) / 32;
  S = S < by_ctx ? S : by_ctx;
  return S > 1 ? S : 1;
}

cudaError_t flash_decoding_attention(const PagedAttentionParams& p, int T, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  const int S =
      p.split_workspace && p.split_counters ? attention_splits(T, p.hq, p.hkv, p.max_blocks_per_req * p.block_size) : 1;
  return p.f32 ? dispatch<float>(p, T, S, s) : dispatch<uint16_t>(p, T, S, s);
}

}  // namespace gs::cuda
