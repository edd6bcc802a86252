// Paged attention: one CTA per (query token, kv head, group of up to 8 query heads), whose four
// warps each take 32-key chunks of the causal context (one key per lane for q.k, lanes split
// the head dim for p.v), merged at the end with the online-softmax rule. Prefill, decode and
// mixed batches run the same kernel; it reads every per-batch value from device buffers.
#include <cfloat>

#include "attention/cuda/attention_kernels.h"
#include "ops/cuda/device_util.cuh"

namespace gs::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kGroup = 8;  // query heads per CTA (GQA group, split when larger)
constexpr int kVBatch = 8;  // keys whose V rows are loaded together

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
template <int MAXD>
__device__ __forceinline__ float dot_row(const uint16_t* kp, const float* qs, int D) {
  float s = 0.0f;
  if (D % 8 == 0) {
    uint4 kv[MAXD / 8];
#pragma unroll
    for (int c = 0; c < MAXD / 8; ++c)
      if (c * 8 < D) kv[c] = *reinterpret_cast<const uint4*>(kp + c * 8);
#pragma unroll
    for (int c = 0; c < MAXD / 8; ++c) {
      if (c * 8 >= D) break;
      float kf[8];
      unpack8(kv[c], kf);
#pragma unroll
      for (int j = 0; j < 8; ++j) s = fmaf(qs[c * 8 + j], kf[j], s);
    }
  } else {
    for (int d = 0; d < D; ++d) s = fmaf(qs[d], bf2f(kp[d]), s);
  }
  return s;
}

template <int DPL>  // head dims per lane: D <= 32 * DPL
__global__ void __launch_bounds__(kWarps * 32) paged_attention_kernel(PagedAttentionParams p) {
  constexpr int MAXD = 32 * DPL;
  __shared__ float q_s[kGroup][MAXD];
  __shared__ float m_s[kWarps][kGroup], l_s[kWarps][kGroup];
  __shared__ float acc_s[kWarps][kGroup][MAXD];

  const int t = blockIdx.x, D = p.D;
  const int G = p.hq / p.hkv, chunks = (G + kGroup - 1) / kGroup;
  const int g = blockIdx.y / chunks;
  const int h0 = g * G + (blockIdx.y % chunks) * kGroup;
  const int nh = min(kGroup, g * G + G - h0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  uint16_t* out = p.out + (int64_t(t) * p.hq + h0) * D;

  const int r = find_request(p.query_start_loc, p.num_reqs_padded, t);
  int limit = 0;
  if (r < p.num_reqs_padded && t < p.query_start_loc[r + 1]) {
    const int qlen = p.query_start_loc[r + 1] - p.query_start_loc[r];
    const int ctx = min(p.seq_lens[r], p.max_blocks_per_req * p.block_size);
    limit = min(ctx, p.seq_lens[r] - qlen + (t - p.query_start_loc[r]) + 1);
  }
  if (limit <= 0) {
    for (int i = threadIdx.x; i < nh * D; i += blockDim.x) out[i] = 0;
    return;
  }
  const uint16_t* qp = p.q + (int64_t(t) * p.hq + h0) * D;
  for (int i = threadIdx.x; i < nh * D; i += blockDim.x) q_s[i / D][i % D] = bf2f(qp[i]) * p.scale;
  __syncthreads();

  const int32_t* bt = p.block_table + int64_t(r) * p.max_blocks_per_req;
  const int64_t row = int64_t(p.hkv) * D;
  float m[kGroup], l[kGroup], acc[kGroup][DPL];
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    m[h] = -FLT_MAX;
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[h][i] = 0.0f;
  }

  for (int base = warp * 32; base < limit; base += kWarps * 32) {
    const int j = base + lane;
    const bool valid = j < limit;
    int64_t slot = 0;
    if (valid) {
      const int blk = min(max(bt[j / p.block_size], 0), p.num_blocks - 1);
      slot = int64_t(blk) * p.block_size + j % p.block_size;
    }
    const uint16_t* kp = p.k_cache + slot * row + int64_t(g) * D;
    float pr[kGroup];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h >= nh) break;
      const float s = valid ? dot_row<MAXD>(kp, q_s[h], D) : -FLT_MAX;
      const float mn = fmaxf(m[h], warp_max(s));
      const float corr = __expf(m[h] - mn);
      pr[h] = valid ? __expf(s - mn) : 0.0f;
      l[h] = l[h] * corr + warp_sum(pr[h]);
      m[h] = mn;
#pragma unroll
      for (int i = 0; i < DPL; ++i) acc[h][i] *= corr;
    }
    // p.v in batches of kVBatch keys, each batch's loads issued before its FMAs.
    const int n = min(32, limit - base);
    for (int j0 = 0; j0 < n; j0 += kVBatch) {
      float vv[kVBatch][DPL];
#pragma unroll
      for (int b = 0; b < kVBatch; ++b) {
        const int64_t sj = __shfl_sync(0xffffffffu, slot, (j0 + b) & 31);
        const uint16_t* vp = p.v_cache + sj * row + int64_t(g) * D;
#pragma unroll
        for (int i = 0; i < DPL; ++i)
          vv[b][i] = (j0 + b < n && lane + 32 * i < D) ? bf2f(vp[lane + 32 * i]) : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < kGroup; ++h) {
        if (h >= nh) break;
#pragma unroll
        for (int b = 0; b < kVBatch; ++b) {
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
    out[e] = f2bf(den > 0.0f ? num / den : 0.0f);
  }
}

}  // namespace

cudaError_t reshape_and_cache(const uint16_t* k, const uint16_t* v, uint16_t* k_cache,
                              uint16_t* v_cache, const int32_t* slot_mapping, int T, int hkv, int D,
                              int64_t num_slots, cudaStream_t s) {
  if (T > 0) reshape_and_cache_kernel<<<T, 128, 0, s>>>(k, v, k_cache, v_cache, slot_mapping, hkv * D, num_slots);
  return cudaGetLastError();
}

cudaError_t paged_attention(const PagedAttentionParams& p, int T, cudaStream_t s) {
  if (T <= 0) return cudaGetLastError();
  const int G = p.hq / p.hkv;
  const dim3 grid(unsigned(T), unsigned(p.hkv * ((G + kGroup - 1) / kGroup)));
  if (p.D <= 64)
    paged_attention_kernel<2><<<grid, kWarps * 32, 0, s>>>(p);
  else if (p.D <= 128)
    paged_attention_kernel<4><<<grid, kWarps * 32, 0, s>>>(p);
  else if (p.D <= kMaxAttentionHeadDim)
    paged_attention_kernel<8><<<grid, kWarps * 32, 0, s>>>(p);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gs::cuda
