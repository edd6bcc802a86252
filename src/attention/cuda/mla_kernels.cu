// Implements attention/cuda/mla_kernels.h: four kernels per layer.
//   latent: each real token's kv_a row -> kv_a_layernorm(c_kv) and rotated k_pe, into its slot;
//   absorb: q_lat = W_UK^T q_nope and the rotated q_pe of every (token, head) into q_latent, a
//           CTA per (head, 64 latent columns, 16 tokens) with its weights in registers;
//   attend: one CTA per (token, group of 16 heads, context split): multi-query attention over
//           the split's share of the cached latent rows up to the token's position, every row
//           loaded once for the group (scores over L + R dims, values the first L);
//   expand: out = W_UV o_lat, a CTA per (head, 16 v rows, 16 tokens) with its weights in
//           registers, merging the splits' partial outputs by their log-sum-exp first.
#include <algorithm>
#include <cfloat>

#include "attention/cuda/find_request.cuh"
#include "attention/cuda/mla_kernels.h"
#include "ops/cuda/device_util.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kHeadGroup = 16;                         // heads one attend CTA serves
constexpr int kRows = 16;                              // cached rows one attend step loads
constexpr int kSub = kThreads / kHeadGroup;            // threads per head in the value update
constexpr int kAccPerThread = kMlaMaxLoraRank / kSub;  // accumulators per thread
constexpr int kTokenTile = 16;                         // tokens one absorb / expand CTA serves
constexpr int kMaxNope = 256;                          // the most qk_nope_head_dim absorb holds
constexpr int kAbsorbCols = 64;                        // W_UK columns one absorb CTA holds
constexpr int kExpandRows = 16;                        // W_UV rows one expand CTA holds
constexpr int kGroupTokens = 4;                        // tokens absorb / expand reduce at once
static_assert(kAbsorbCols == 8 * 8 && kThreads / 8 == 32, "absorb: 8 threads of 8 columns, 32 row slices");
static_assert(kMlaMaxSplits == 32, "expand merges the splits a lane each");

// Rope pair i at position pos: its two indices in the head's rope dims and the scaled (cos, sin).
struct RopePair {
  int a, b;
  float c, s;
  __device__ __forceinline__ void rotate(float x0, float x1, float* out) const {
    out[a] = x0 * c - x1 * s;
    out[b] = x1 * c + x0 * s;
  }
};
__device__ __forceinline__ RopePair rope_pair(int i, int pos, const MlaDims& d, const float* inv_freq) {
  RopePair p;
  sincosf(float(pos) * inv_freq[i], &p.s, &p.c);
  p.c *= d.rope_scale, p.s *= d.rope_scale;
  const int half = d.rope / 2;
  p.a = d.interleave ? 2 * i : i, p.b = d.interleave ? 2 * i + 1 : i + half;
  return p;
}

template <typename T>
__global__ void latent_kernel(MlaLaunch<T> l) {
  const int t = blockIdx.x;
  const int actual = min(l.num_tokens, l.qsl[l.num_reqs]);
  if (t >= actual || l.slots[t] < 0) return;
  const MlaDims& d = l.d;
  const int L = d.kv_lora_rank, D = d.latent();
  __shared__ float pe[256];
  const T* x = l.kv_a + int64_t(t) * D;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < L; i += kThreads) {
    const float v = to_f(x[i]);
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = rsqrtf(ss / float(L) + l.norm_eps);
  T* row = l.cache + int64_t(l.slots[t]) * D;
  for (int i = threadIdx.x; i < L; i += kThreads) row[i] = from_f<T>(to_f(l.kv_a_norm[i]) * (to_f(x[i]) * inv));
  for (int i = threadIdx.x; i < d.rope; i += kThreads) pe[i] = to_f(x[L + i]);
  __syncthreads();
  if (threadIdx.x < d.rope / 2) {
    const RopePair rp = rope_pair(threadIdx.x, l.positions[t], d, l.inv_freq);
    rp.rotate(pe[rp.a], pe[rp.b], pe);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < d.rope; i += kThreads) row[L + i] = from_f<T>(pe[i]);
}

// absorb: a CTA holds W_UK's kAbsorbCols columns of one head in registers (thread: 8 columns
// of nope / 32 rows) and applies them to up to kTokenTile tokens, so each weight is read once
// a tile; the 32 row slices' partial sums of kGroupTokens tokens at a time meet through warp
// shuffles and shared memory.
template <typename T>
__global__ void __launch_bounds__(kThreads) absorb_kernel(MlaLaunch<T> l) {
  __shared__ float qn[kTokenTile][kMaxNope];
  __shared__ float red[kGroupTokens][kWarps][kAbsorbCols];
  const MlaDims& d = l.d;
  const int h = blockIdx.x, c0 = blockIdx.y * kAbsorbCols, t0 = blockIdx.z * kTokenTile;
  const int L = d.kv_lora_rank, D = d.latent(), qk = d.nope + d.rope;
  const int nt = min(kTokenTile, l.num_tokens - t0), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c8 = threadIdx.x % 8, js = threadIdx.x / 8, col = c0 + c8 * 8;
  const T* wk = l.kv_b + int64_t(h) * (d.nope + d.v) * L;  // W_UK: the head's first `nope` rows
  float w[kMaxNope / 32][8];
#pragma unroll
  for (int k = 0; k < kMaxNope / 32; ++k) {
    const int j = js + 32 * k;
    if (j < d.nope && col < L)
      load8(wk + int64_t(j) * L + col, w[k]);
    else
#pragma unroll
      for (int i = 0; i < 8; ++i) w[k][i] = 0.0f;
  }
  for (int i = threadIdx.x; i < nt * d.nope; i += kThreads) {
    const int ti = i / d.nope, j = i - ti * d.nope;
    qn[ti][j] = to_f(l.q[(int64_t(t0 + ti) * d.heads + h) * qk + j]);
  }
  __syncthreads();
  for (int ti0 = 0; ti0 < nt; ti0 += kGroupTokens) {
    float p[kGroupTokens][8] = {};
#pragma unroll
    for (int k = 0; k < kMaxNope / 32; ++k) {
      const int j = js + 32 * k;
      if (j >= d.nope) break;
#pragma unroll
      for (int g = 0; g < kGroupTokens; ++g) {
        const float x = ti0 + g < nt ? qn[ti0 + g][j] : 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) p[g][i] += x * w[k][i];
      }
    }
#pragma unroll
    for (int g = 0; g < kGroupTokens; ++g)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        p[g][i] += __shfl_xor_sync(0xffffffffu, p[g][i], 8);
        p[g][i] += __shfl_xor_sync(0xffffffffu, p[g][i], 16);
      }
    if (lane < 8)
#pragma unroll
      for (int g = 0; g < kGroupTokens; ++g)
#pragma unroll
        for (int i = 0; i < 8; ++i) red[g][warp][lane * 8 + i] = p[g][i];
    __syncthreads();
    for (int i = threadIdx.x; i < kGroupTokens * kAbsorbCols; i += kThreads) {
      const int g = i / kAbsorbCols, c = i % kAbsorbCols;
      if (ti0 + g >= nt || c0 + c >= L) continue;
      float acc = 0.0f;
#pragma unroll
      for (int u = 0; u < kWarps; ++u) acc += red[g][u][c];
      l.q_latent[(int64_t(t0 + ti0 + g) * d.heads + h) * D + c0 + c] = acc;
    }
    __syncthreads();
  }
  if (blockIdx.y != 0) return;
  const int half = d.rope / 2;  // the first column block also rotates q_pe into the last R columns
  for (int i = threadIdx.x; i < nt * half; i += kThreads) {
    const int ti = i / half, pair = i - ti * half, t = t0 + ti;
    const T* pe = l.q + (int64_t(t) * d.heads + h) * qk + d.nope;
    float* out = l.q_latent + (int64_t(t) * d.heads + h) * D + L;
    const RopePair rp = rope_pair(pair, l.positions[t], d, l.inv_freq);
    rp.rotate(to_f(pe[rp.a]), to_f(pe[rp.b]), out);
  }
}

// The attend CTA's shared-memory layout: q rows padded to a multiple of 4 (float4 dot products),
// cached rows at a stride whose float4 count is odd (conflict-free float4 reads by 8 rows).
struct AttendLayout {
  int dp, ds;
  __host__ __device__ explicit AttendLayout(const MlaDims& d) {
    dp = (d.latent() + 3) / 4 * 4;
    ds = (dp / 4) % 2 ? dp : dp + 4;
  }
};

// Loads rows [p0, p0 + kRows) of the request's cache (zeros past `end`) into k_s.
template <typename T>
__device__ __forceinline__ void load_rows(const MlaLaunch<T>& l, const int32_t* blocks, int p0, int end, int ds,
                                          float* k_s) {
  const int D = l.d.latent();
  if (D % 8 == 0) {
    const int per = D / 8;
    for (int i = threadIdx.x; i < kRows * per; i += kThreads) {
      const int c = i / per, e = (i - c * per) * 8, p = p0 + c;
      float v[8] = {};
      if (p < end) {
        const int64_t slot = int64_t(blocks[p / l.block_size]) * l.block_size + p % l.block_size;
        load8(l.cache + slot * D + e, v);
      }
      float4* dst = reinterpret_cast<float4*>(k_s + c * ds + e);
      dst[0] = make_float4(v[0], v[1], v[2], v[3]);
      dst[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    return;
  }
  for (int i = threadIdx.x; i < kRows * D; i += kThreads) {
    const int c = i / D, e = i - c * D, p = p0 + c;
    float v = 0.0f;
    if (p < end) {
      const int64_t slot = int64_t(blocks[p / l.block_size]) * l.block_size + p % l.block_size;
      v = to_f(l.cache[slot * D + e]);
    }
    k_s[c * ds + e] = v;
  }
}

// attend: one CTA per (token, group of kHeadGroup heads, split): multi-query attention over the
// split's share of the token's context (rows up to its position), every row loaded once for the
// group (scores over L + R dims, values the first L). One split writes the normalised output
// into o_latent; several write their unnormalised sums and (max, sum) into o_part / ml_part.
template <typename T>
__global__ void __launch_bounds__(kThreads) attend_kernel(MlaLaunch<T> l) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const MlaDims& d = l.d;
  const AttendLayout lay(d);
  const int t = blockIdx.x, h0 = blockIdx.y * kHeadGroup, split = blockIdx.z, S = l.splits;
  const int L = d.kv_lora_rank, D = d.latent(), dp = lay.dp, ds = lay.ds;
  const int hg = min(kHeadGroup, d.heads - h0);
  float* q_s = smem;                      // [kHeadGroup][dp]
  float* k_s = q_s + kHeadGroup * dp;     // [kRows][ds]
  float* p_s = k_s + kRows * ds;          // [kHeadGroup][kRows]
  float* m_s = p_s + kHeadGroup * kRows;  // [kHeadGroup]
  float* l_s = m_s + kHeadGroup;          // [kHeadGroup]
  float* c_s = l_s + kHeadGroup;          // [kHeadGroup]
  const int hh = threadIdx.x / kSub, sub = threadIdx.x % kSub;
  const int r = t < l.qsl[l.num_reqs] ? find_request(l.qsl, l.num_reqs, t) : -1;  // -1: a padded token
  int begin = 0, end = 0;
  if (r >= 0) {
    const int q_len = l.qsl[r + 1] - l.qsl[r], n = l.seq_lens[r] - q_len + (t - l.qsl[r]) + 1;
    const int chunk = ((n + S - 1) / S + kRows - 1) / kRows * kRows;
    begin = min(n, split * chunk), end = min(n, begin + chunk);
  }
  for (int i = threadIdx.x; i < kHeadGroup * dp; i += kThreads) {
    const int g = i / dp, e = i - g * dp;
    q_s[i] = g < hg && e < D ? l.q_latent[(int64_t(t) * d.heads + h0 + g) * D + e] : 0.0f;
  }
  for (int i = threadIdx.x; i < kRows * (ds - D); i += kThreads)  // the padding columns stay zero
    k_s[(i / (ds - D)) * ds + D + i % (ds - D)] = 0.0f;
  if (threadIdx.x < kHeadGroup) m_s[threadIdx.x] = -FLT_MAX, l_s[threadIdx.x] = 0.0f;
  float acc[kAccPerThread];
#pragma unroll
  for (int k = 0; k < kAccPerThread; ++k) acc[k] = 0.0f;
  const int32_t* blocks = r >= 0 ? l.block_table + int64_t(r) * l.max_blocks : nullptr;
  for (int p0 = begin; p0 < end; p0 += kRows) {
    __syncthreads();  // the previous step's rows and probabilities are consumed
    load_rows(l, blocks, p0, end, ds, k_s);
    __syncthreads();
    {  // one (head, row) score per thread: kHeadGroup x kRows == kThreads
      const int sh = threadIdx.x / kRows, sc = threadIdx.x % kRows;
      const float4* qv = reinterpret_cast<const float4*>(q_s + sh * dp);
      const float4* kv = reinterpret_cast<const float4*>(k_s + sc * ds);
      float s0 = 0.0f, s1 = 0.0f;
      for (int e = 0; e < dp / 4; ++e) {
        const float4 a = qv[e], b = kv[e];
        s0 += a.x * b.x + a.y * b.y;
        s1 += a.z * b.z + a.w * b.w;
      }
      p_s[sh * kRows + sc] = p0 + sc < end ? (s0 + s1) * d.scale : -FLT_MAX;
    }
    __syncthreads();
    if (threadIdx.x < kHeadGroup) {
      const int g = threadIdx.x;
      float mx = m_s[g];
      for (int c = 0; c < kRows; ++c) mx = fmaxf(mx, p_s[g * kRows + c]);
      const float corr = __expf(m_s[g] - mx);
      float sum = 0.0f;
      for (int c = 0; c < kRows; ++c) {
        const float w = p0 + c < end ? __expf(p_s[g * kRows + c] - mx) : 0.0f;
        p_s[g * kRows + c] = w;
        sum += w;
      }
      l_s[g] = l_s[g] * corr + sum;
      m_s[g] = mx;
      c_s[g] = corr;
    }
    __syncthreads();
    const float corr = c_s[hh];
#pragma unroll
    for (int k = 0; k < kAccPerThread; ++k) {
      const int e = sub + k * kSub;
      if (e >= L) break;
      float a = acc[k] * corr;
      for (int c = 0; c < kRows; ++c) a += p_s[hh * kRows + c] * k_s[c * ds + e];
      acc[k] = a;
    }
  }
  __syncthreads();
  if (hh >= hg) return;
  const int h = h0 + hh;
  if (S == 1) {  // a padded token (no rows) gets zeros, which expand turns into zero rows
    const float inv = l_s[hh] > 0.0f ? 1.0f / l_s[hh] : 0.0f;
    float* o = l.o_latent + (int64_t(t) * d.heads + h) * L;
#pragma unroll
    for (int k = 0; k < kAccPerThread; ++k) {
      const int e = sub + k * kSub;
      if (e >= L) break;
      o[e] = acc[k] * inv;
    }
    return;
  }
  const int64_t row = (int64_t(t) * S + split) * d.heads + h;
  float* o = l.o_part + row * L;
#pragma unroll
  for (int k = 0; k < kAccPerThread; ++k) {
    const int e = sub + k * kSub;
    if (e >= L) break;
    o[e] = acc[k];
  }
  if (sub == 0) l.ml_part[2 * row] = m_s[hh], l.ml_part[2 * row + 1] = l_s[hh];
}

// The latent outputs of head h of tokens t0 .. t0 + g into o_s[i]: o_latent's rows, or the
// splits' partial sums merged by their (max, sum) (zeros for a token without rows).
template <typename T>
__device__ __forceinline__ void gather_latent(const MlaLaunch<T>& l, int t0, int g, int h,
                                              float (*o_s)[kMlaMaxLoraRank], float (*w_s)[kMlaMaxSplits]) {
  const int L = l.d.kv_lora_rank, S = l.splits, H = l.d.heads;
  if (S == 1) {
    for (int i = threadIdx.x; i < g * L; i += kThreads) {
      const int gi = i / L, e = i - gi * L;
      o_s[gi][e] = l.o_latent[(int64_t(t0 + gi) * H + h) * L + e];
    }
    return;
  }
  const int warp = threadIdx.x / 32, s = threadIdx.x % 32;  // kMlaMaxSplits == 32: a lane a split
  if (warp < g) {
    const int64_t row = (int64_t(t0 + warp) * S + s) * H + h;
    const float m = s < S ? l.ml_part[2 * row] : -FLT_MAX, n = s < S ? l.ml_part[2 * row + 1] : 0.0f;
    const float mx = warp_max(n > 0.0f ? m : -FLT_MAX);
    const float w = n > 0.0f ? __expf(m - mx) : 0.0f;
    const float den = warp_sum(w * n);
    w_s[warp][s] = den > 0.0f ? w / den : 0.0f;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < g * L; i += kThreads) {
    const int gi = i / L, e = i - gi * L;
    const int64_t row0 = int64_t(t0 + gi) * S * H + h;  // split u: row0 + u H
    float o = 0.0f;
    for (int u = 0; u < S; ++u) {
      const float w = w_s[gi][u];
      if (w != 0.0f) o += w * l.o_part[(row0 + int64_t(u) * H) * L + e];
    }
    o_s[gi][e] = o;
  }
}

// expand: a CTA holds kExpandRows rows of one head's W_UV in registers (a warp two rows, a lane
// 8-column segments) and applies them to up to kTokenTile tokens' latent outputs, kGroupTokens
// at a time.
template <typename T>
__global__ void __launch_bounds__(kThreads) expand_kernel(MlaLaunch<T> l) {
  __shared__ __align__(16) float o_s[kGroupTokens][kMlaMaxLoraRank];
  __shared__ float w_s[kGroupTokens][kMlaMaxSplits];
  const MlaDims& d = l.d;
  const int h = blockIdx.x, j0 = blockIdx.y * kExpandRows, t0 = blockIdx.z * kTokenTile;
  const int L = d.kv_lora_rank, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt = min(kTokenTile, l.num_tokens - t0);
  const T* wv = l.kv_b + (int64_t(h) * (d.nope + d.v) + d.nope) * L;  // W_UV: the head's last `v` rows
  constexpr int kPerWarp = kExpandRows / kWarps, kSeg = kMlaMaxLoraRank / 256;
  float w[kPerWarp][kSeg][8];
#pragma unroll
  for (int rr = 0; rr < kPerWarp; ++rr)
#pragma unroll
    for (int k = 0; k < kSeg; ++k) {
      const int j = j0 + warp * kPerWarp + rr, e = (lane + 32 * k) * 8;
      if (j < d.v && e < L)
        load8(wv + int64_t(j) * L + e, w[rr][k]);
      else
#pragma unroll
        for (int i = 0; i < 8; ++i) w[rr][k][i] = 0.0f;
    }
  for (int ti0 = 0; ti0 < nt; ti0 += kGroupTokens) {
    const int g = min(kGroupTokens, nt - ti0);
    __syncthreads();  // the previous group's o_s and w_s are consumed
    gather_latent(l, t0 + ti0, g, h, o_s, w_s);
    __syncthreads();
#pragma unroll
    for (int gi = 0; gi < kGroupTokens; ++gi) {
      if (gi >= g) break;
#pragma unroll
      for (int rr = 0; rr < kPerWarp; ++rr) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < kSeg; ++k) {
          const int e = (lane + 32 * k) * 8;
          if (e >= L) break;
          const float4 a = *reinterpret_cast<const float4*>(&o_s[gi][e]);
          const float4 b = *reinterpret_cast<const float4*>(&o_s[gi][e + 4]);
          acc += w[rr][k][0] * a.x + w[rr][k][1] * a.y + w[rr][k][2] * a.z + w[rr][k][3] * a.w;
          acc += w[rr][k][4] * b.x + w[rr][k][5] * b.y + w[rr][k][6] * b.z + w[rr][k][7] * b.w;
        }
        acc = warp_sum(acc);
        const int j = j0 + warp * kPerWarp + rr;
        if (lane == 0 && j < d.v) l.out[(int64_t(t0 + ti0 + gi) * d.heads + h) * d.v + j] = from_f<T>(acc);
      }
    }
  }
}

size_t attend_smem(const MlaDims& d) {
  const AttendLayout lay(d);
  return sizeof(float) * (size_t(kHeadGroup) * lay.dp + size_t(kRows) * lay.ds + kHeadGroup * kRows + 3 * kHeadGroup);
}

}  // namespace

bool mla_dims_supported(const MlaDims& d) {
  return d.heads > 0 && d.nope > 0 && d.nope <= kMaxNope && d.rope > 0 && d.rope <= 256 && d.rope % 2 == 0 && d.v > 0 &&
         d.kv_lora_rank > 0 && d.kv_lora_rank % 8 == 0 && d.kv_lora_rank <= kMlaMaxLoraRank &&
         attend_smem(d) <= 200 * 1024;
}

int mla_splits(int num_tokens, int heads, int sm_count) {
  const int ctas = num_tokens * ((heads + kHeadGroup - 1) / kHeadGroup);
  if (num_tokens <= 0 || ctas >= 2 * sm_count) return 1;
  const int s = std::min({kMlaMaxSplits, (2 * sm_count + ctas - 1) / ctas, kMlaSplitRows / num_tokens});
  return std::max(s, 1);
}

template <typename T>
cudaError_t launch_mla(const MlaLaunch<T>& l, cudaStream_t stream) {
  if (l.num_tokens == 0) return cudaSuccess;
  if (l.splits < 1 || l.splits > kMlaMaxSplits || (l.splits > 1 && l.num_tokens * l.splits > kMlaSplitRows))
    return cudaErrorInvalidValue;
  const MlaDims& d = l.d;
  const unsigned tiles = unsigned((l.num_tokens + kTokenTile - 1) / kTokenTile), H = unsigned(d.heads);
  const dim3 absorb(H, unsigned((d.kv_lora_rank + kAbsorbCols - 1) / kAbsorbCols), tiles);
  const dim3 attend(unsigned(l.num_tokens), unsigned((d.heads + kHeadGroup - 1) / kHeadGroup), unsigned(l.splits));
  const dim3 expand(H, unsigned((d.v + kExpandRows - 1) / kExpandRows), tiles);
  latent_kernel<T><<<l.num_tokens, kThreads, 0, stream>>>(l);
  absorb_kernel<T><<<absorb, kThreads, 0, stream>>>(l);
  attend_kernel<T><<<attend, kThreads, attend_smem(d), stream>>>(l);
  expand_kernel<T><<<expand, kThreads, 0, stream>>>(l);
  return cudaGetLastError();
}

template <typename T>
cudaError_t prepare_mla(const MlaDims& d) {
  return cudaFuncSetAttribute(attend_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(attend_smem(d)));
}

template cudaError_t prepare_mla<float>(const MlaDims&);
template cudaError_t prepare_mla<uint16_t>(const MlaDims&);
template cudaError_t launch_mla<float>(const MlaLaunch<float>&, cudaStream_t);
template cudaError_t launch_mla<uint16_t>(const MlaLaunch<uint16_t>&, cudaStream_t);

}  // namespace gs::cuda
