// Paged attention: one CTA per (query token, kv head, group of up to 8 query heads, context
// split), whose four warps each take 32-key chunks of its part of the causal context (one key
// per lane for q.k, lanes split the head dim for p.v), merged at the end with the
// online-softmax rule. With one split the CTA writes the output; with several (flash-decoding,
// for small batches whose few CTAs would leave the GPU idle) each writes its normalised partial
// output and (max, sum) and a combine kernel merges them. Prefill, decode and mixed batches run
// the same kernels; they read every per-batch value from device buffers.
#include <cfloat>

#include "attention/cuda/attention_kernels.h"
#include "ops/cuda/device_util.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kGroup = 8;        // query heads per CTA (GQA group, split when larger)
constexpr int kMaxSplits = 16;   // CTAs per context at most
constexpr int kSplitTarget = 256;  // CTAs to aim for (about two per SM of an H100/H200)

__global__ void reshape_and_cache_kernel(const uint16_t* k, const uint16_t* v, uint16_t* kc,
                                         uint16_t* vc, const int32_t* slots, int row, int64_t num_slots) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  for (int i = threadIdx.x; i < row; i += blockDim.x) {
    kc[slot * row + i] = k[t * row + i];
    vc[slot * row + i] = v[t * row + i];
  }
}

// Largest r in [0, n] with qsl[r] <= t (qsl is non-decreasing, qsl[0] = 0).
__device__ int find_request(const int32_t* qsl, int n, int t) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qsl[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

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

// Keys of the p.v step whose V elements are loaded together (64 loads in flight per lane).
template <int DPL>
constexpr int kVBatch = DPL <= 2 ? 32 : 64 / DPL;

template <typename T, int DPL, bool SPLIT>  // head dims per lane: D <= 32 * DPL
__global__ void __launch_bounds__(kWarps * 32) paged_attention_kernel(PagedAttentionParams p) {
  constexpr int MAXD = 32 * DPL;
  // Many V loads in flight only where the grid is small (split path); elsewhere the registers
  // they cost halve occupancy (bs 128 on an H200: 1.45 -> 1.81 ms with 32 for every path).
  constexpr int VB = SPLIT ? kVBatch<DPL> : 8;
  __shared__ float q_s[kGroup][MAXD];
  __shared__ float m_s[kWarps][kGroup], l_s[kWarps][kGroup];
  __shared__ float acc_s[kWarps][kGroup][MAXD];

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

  const int r = find_request(p.query_start_loc, p.num_reqs_padded, t);
  int limit = 0;
  if (r < p.num_reqs_padded && t < p.query_start_loc[r + 1]) {
    const int qlen = p.query_start_loc[r + 1] - p.query_start_loc[r];
    const int ctx = min(p.seq_lens[r], p.max_blocks_per_req * p.block_size);
    limit = min(ctx, p.seq_lens[r] - qlen + (t - p.query_start_loc[r]) + 1);
  }
  int begin = 0, end = max(limit, 0);
  if (SPLIT) {  // even parts of whole 32-key chunks; trailing splits may be empty
    const int per = max(32, ((end + S - 1) / S + 31) / 32 * 32);
    begin = min(end, z * per);
    end = min(end, begin + per);
  }
  if (end <= begin) {
    if (SPLIT) {
      for (int h = threadIdx.x; h < nh; h += blockDim.x) ml[2 * (part0 + int64_t(h) * S) + 1] = 0.0f;
    } else {
      for (int i = threadIdx.x; i < nh * D; i += blockDim.x) out[i] = from_f<T>(0.0f);
    }
    return;
  }
  const T* qp = static_cast<const T*>(p.q) + (int64_t(t) * p.hq + h0) * D;
  for (int i = threadIdx.x; i < nh * D; i += blockDim.x) q_s[i / D][i % D] = to_f(qp[i]) * p.scale;
  __syncthreads();

  const int32_t* bt = p.block_table + int64_t(r) * p.max_blocks_per_req;
  const int64_t row = int64_t(p.hkv) * D;
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
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
    int64_t slot = 0;
    if (valid) {
      const int blk = min(max(bt[j / p.block_size], 0), p.num_blocks - 1);
      slot = int64_t(blk) * p.block_size + j % p.block_size;
    }
    const T* kp = kc + slot * row + int64_t(g) * D;
    float pr[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h >= nh) break;
      const float s = valid ? dot_row<T, MAXD>(kp, q_s[h], D) : -FLT_MAX;
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
        const int64_t sj = __shfl_sync(0xffffffffu, slot, (j0 + b) & 31);
        const T* vp = vc + sj * row + int64_t(g) * D;
#pragma unroll
        for (int i = 0; i < DPL; ++i)
          vv[b][i] = (j0 + b < n && lane + 32 * i < D) ? to_f(vp[lane + 32 * i]) : 0.0f;
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
    const float o = den > 0.0f ? num / den : 0.0f;
    if (SPLIT) {
      const int64_t part = part0 + int64_t(h) * S;
      pacc[part * D + d] = o;
      if (d == 0) ml[2 * part] = mx, ml[2 * part + 1] = den;
    } else {
      out[e] = from_f<T>(o);
    }
  }
}

// Merges the S partial states of each (token, head): out = sum_s w_s o_s / sum_s w_s with
// w_s = l_s exp(m_s - max m). One CTA per (token, head); splits with l_s = 0 are empty.
template <typename T>
__global__ void combine_splits_kernel(const float* ws, T* out, int hq, int D, int S) {
  const int64_t th = int64_t(blockIdx.x) * hq + blockIdx.y;  // (token, head)
  const float* ml = ws + 2 * th * S;
  const float* pacc = ws + 2 * int64_t(gridDim.x) * hq * S + th * S * D;
  float mx = -FLT_MAX;
  for (int s = 0; s < S; ++s)
    if (ml[2 * s + 1] > 0.0f) mx = fmaxf(mx, ml[2 * s]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < S; ++s) {
      const float l = ml[2 * s + 1];
      if (l <= 0.0f) continue;
      const float w = l * __expf(ml[2 * s] - mx);
      den += w;
      num += w * pacc[int64_t(s) * D + d];
    }
    out[th * D + d] = from_f<T>(den > 0.0f ? num / den : 0.0f);
  }
}

template <typename T, int DPL>
void launch(const PagedAttentionParams& p, int T_, int S, cudaStream_t s) {
  const int G = p.hq / p.hkv;
  const dim3 grid(unsigned(T_), unsigned(p.hkv * ((G + kGroup - 1) / kGroup)), unsigned(S));
  if (S == 1) {
    paged_attention_kernel<T, DPL, false><<<grid, kWarps * 32, 0, s>>>(p);
    return;
  }
  paged_attention_kernel<T, DPL, true><<<grid, kWarps * 32, 0, s>>>(p);
  const int threads = p.D <= 64 ? 64 : 128;
  combine_splits_kernel<T><<<dim3(unsigned(T_), unsigned(p.hq)), threads, 0, s>>>(
      p.split_workspace, static_cast<T*>(p.out), p.hq, p.D, S);
}

template <typename T>
cudaError_t dispatch(const PagedAttentionParams& p, int T_, int S, cudaStream_t s) {
  if (p.D <= 64)
    launch<T, 2>(p, T_, S, s);
  else if (p.D <= 128)
    launch<T, 4>(p, T_, S, s);
  else if (p.D <= kMaxAttentionHeadDim)
    launch<T, 8>(p, T_, S, s);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
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
  if (base <= 0 || base >= kSplitTarget) return 1;
  int S = (kSplitTarget + base - 1) / base;
  S = S < kMaxSplits ? S : kMaxSplits;
  const int by_ctx = (max_context + 31) / 32;
  S = S < by_ctx ? S : by_ctx;
  return S > 1 ? S : 1;
}

cudaError_t reshape_and_cache(const void* k, const void* v, void* k_cache, void* v_cache,
                              const int32_t* slot_mapping, int T, int hkv, int D, int elem_bytes,
                              int64_t num_slots, cudaStream_t s) {
  const int units = hkv * D * elem_bytes / 2;  // rows copied in 2-byte units
  if (T > 0)
    reshape_and_cache_kernel<<<T, 128, 0, s>>>(
        static_cast<const uint16_t*>(k), static_cast<const uint16_t*>(v), static_cast<uint16_t*>(k_cache),
        static_cast<uint16_t*>(v_cache), slot_mapping, units, num_slots);
  return cudaGetLastError();
}

cudaError_t paged_attention(const PagedAttentionParams& p, int T, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  const int S = p.split_workspace
                    ? attention_splits(T, p.hq, p.hkv, p.max_blocks_per_req * p.block_size)
                    : 1;
  return p.f32 ? dispatch<float>(p, T, S, s) : dispatch<uint16_t>(p, T, S, s);
}

}  // namespace gs::cuda
