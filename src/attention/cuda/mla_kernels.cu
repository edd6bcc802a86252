// Implements attention/cuda/mla_kernels.h: four kernels per layer (five with context splits).
//   latent: each real token's kv_a row -> kv_a_layernorm(c_kv) and rotated k_pe, into its slot;
//   absorb: q_lat = W_UK^T q_nope and the rotated q_pe of every (token, head) into q_latent, a
//           CTA per (head, 64 latent columns, 16 tokens) with its weights in registers;
//   attend: one CTA per (token, group of 16 heads, context split): multi-query attention over
//           the split's share of the cached latent rows up to the token's position, every row
//           loaded once for the group (scores over L + R dims, values the first L); or, where
//           the launch asks for it, its tensor-core form (mla_attend_mma.cu);
//   merge:  (context splits only) the splits' partial outputs of a (token, head), weighted by
//           their running max and sum, into o_latent;
//   expand: out = W_UV o_lat, a CTA per (head, 16 v rows, 16 tokens) with its weights in
//           registers.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "attention/cuda/find_request.cuh"
#include "attention/cuda/mla_kernels.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kHeadGroup = 16;                // heads one attend CTA serves
constexpr int kRows = 16;                     // cached rows one attend step loads
constexpr int kAcc4 = kMlaMaxLoraRank / 128;  // float4 value accumulators of a lane a head
constexpr int kMergeThreads = 128;
constexpr int kMergeBatch = 4;  // splits merge loads at once
constexpr int kQBatch = 9;      // float4s of q a thread loads at once (16 heads x 576 / 4 / 256)
constexpr int kRowBatch = 6;    // cache vectors a thread loads at once (16 rows x 768 / 8 / 256)
static_assert(kHeadGroup == 2 * kWarps && kRows == 16, "attend: a warp two heads, a half-warp a head's rows");
constexpr int kTokenTile = 16;   // tokens one absorb / expand CTA serves
constexpr int kMaxNope = 256;    // the most qk_nope_head_dim absorb holds
constexpr int kAbsorbCols = 64;  // W_UK columns one absorb CTA holds
constexpr int kExpandRows = 16;  // W_UV rows one expand CTA holds
constexpr int kGroupTokens = 4;  // tokens absorb / expand reduce at once
static_assert(kAbsorbCols == 8 * 8 && kThreads / 8 == 32, "absorb: 8 threads of 8 columns, 32 row slices");
static_assert(kMlaMaxSplits == 32, "merge weighs the splits a lane each");

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

// store(i, load(i)) for i in [threadIdx.x, n) step kThreads, each group of kBatch loads issued
// before its stores: a store through a generic pointer may alias a later load, so a plain loop
// would wait out every load's latency in turn.
template <int kBatch, typename Load, typename Store>
__device__ __forceinline__ void batched_copy(int n, Load load, Store store) {
  for (int i0 = threadIdx.x; i0 < n; i0 += kBatch * kThreads) {
    decltype(load(0)) v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (i0 + u * kThreads < n) v[u] = load(i0 + u * kThreads);
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (i0 + u * kThreads < n) store(i0 + u * kThreads, v[u]);
  }
}

template <typename T>
__global__ void latent_kernel(MlaLaunch<T> l) {
  pdl_wait();
  pdl_trigger();
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
  const int64_t at = int64_t(l.slots[t]) * D;
  const float q_inv = 1.0f / l.cache_scale;
  const auto store = [&](int i, float v) {
    if (l.cache8)
      l.cache8[at + i] = __nv_cvt_float_to_fp8(v * q_inv, __NV_SATFINITE, __NV_E4M3);
    else
      l.cache[at + i] = from_f<T>(v);
  };
  for (int i = threadIdx.x; i < L; i += kThreads) store(i, to_f(l.kv_a_norm[i]) * (to_f(x[i]) * inv));
  for (int i = threadIdx.x; i < d.rope; i += kThreads) pe[i] = to_f(x[L + i]);
  __syncthreads();
  if (threadIdx.x < d.rope / 2) {
    const RopePair rp = rope_pair(threadIdx.x, l.positions[t], d, l.inv_freq);
    rp.rotate(pe[rp.a], pe[rp.b], pe);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < d.rope; i += kThreads) store(L + i, pe[i]);
}

// q_pe of head h's tokens [t0, t0 + nt), rotated, into q_latent's last R columns.
template <typename T>
__device__ void rotate_q_pe(const MlaLaunch<T>& l, int h, int t0, int nt) {
  const MlaDims& d = l.d;
  const int half = d.rope / 2, qk = d.nope + d.rope, D = d.latent();
  for (int i = threadIdx.x; i < nt * half; i += kThreads) {
    const int ti = i / half, pair = i - ti * half, t = t0 + ti;
    const T* pe = l.q + (int64_t(t) * d.heads + h) * qk + d.nope;
    float* out = l.q_latent + (int64_t(t) * d.heads + h) * D + d.kv_lora_rank;
    const RopePair rp = rope_pair(pair, l.positions[t], d, l.inv_freq);
    rp.rotate(to_f(pe[rp.a]), to_f(pe[rp.b]), out);
  }
}

// absorb: a CTA holds W_UK's kAbsorbCols columns of one head in registers (thread: 8 columns
// of nope / 32 rows) and applies them to up to kTokenTile tokens, so each weight is read once
// a tile; the 32 row slices' partial sums of kGroupTokens tokens at a time meet through warp
// shuffles and shared memory. The first column block also rotates q_pe (with gemms_apart, that
// alone: a column block a head).
template <typename T>
__global__ void __launch_bounds__(kThreads) absorb_kernel(MlaLaunch<T> l) {
  if (l.gemms_apart) {
    pdl_wait();
    pdl_trigger();
    const int t0 = blockIdx.z * kTokenTile;
    rotate_q_pe(l, blockIdx.x, t0, min(kTokenTile, l.num_tokens - t0));
    return;
  }
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
  pdl_wait();  // the weights above are constant; q and positions come from earlier kernels
  pdl_trigger();
  batched_copy<8>(
      nt * d.nope, [&](int i) { return to_f(l.q[(int64_t(t0 + i / d.nope) * d.heads + h) * qk + i % d.nope]); },
      [&](int i, float v) { qn[i / d.nope][i % d.nope] = v; });
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
  if (blockIdx.y == 0) rotate_q_pe(l, h, t0, nt);
}

// The attend CTA's shared-memory layout: q rows padded to a multiple of 4 (float4 dot products),
// cached rows at a stride of 4 mod 8 float4s, so the score step's quarter-warps (4 column
// lanes x 2 adjacent rows) read 8 distinct bank groups.
struct AttendLayout {
  int dp, ds;
  __host__ __device__ explicit AttendLayout(const MlaDims& d) {
    dp = (d.latent() + 3) / 4 * 4;
    ds = dp + 4 * ((12 - (dp / 4) % 8) % 8);
  }
};

// Values 8 ch .. 8 ch + 8 of row c of k_s (rows ds floats apart).
__device__ __forceinline__ void store_chunk(float* k_s, int c, int ds, int ch, const float (&f)[8]) {
  float4* dst = reinterpret_cast<float4*>(k_s + c * ds + ch * 8);
  dst[0] = make_float4(f[0], f[1], f[2], f[3]);
  dst[1] = make_float4(f[4], f[5], f[6], f[7]);
}

// Rows p0 .. p0 + kRows (zeros from end) of an e4m3 cache into k_s, dequantized, 8 values a load
// (the backend holds an e4m3 cache to latent widths of multiples of 8).
template <typename T>
__device__ __forceinline__ void load_rows_e4m3(const MlaLaunch<T>& l, const int32_t* blocks, int p0, int end, int ds,
                                               float* k_s) {
  const int D = l.d.latent(), bs = l.block_size;
  const float sc = l.cache_scale;
  const int per = D / 8;
  batched_copy<kRowBatch>(
      kRows * per,
      [&](int i) {
        const int c = i / per, p = p0 + c;
        if (p >= end) return make_uint2(0, 0);
        return *reinterpret_cast<const uint2*>(l.cache8 + (int64_t(blocks[p / bs]) * bs + p % bs) * D +
                                               (i - c * per) * 8);
      },
      [&](int i, const uint2& r) {
        const int c = i / per;
        const uint32_t h[4] = {e4m3x2_to_f16x2(r.x), e4m3x2_to_f16x2(r.x >> 16), e4m3x2_to_f16x2(r.y),
                               e4m3x2_to_f16x2(r.y >> 16)};
        float f[8];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&h[k]));
          f[2 * k] = v.x * sc, f[2 * k + 1] = v.y * sc;
        }
        store_chunk(k_s, c, ds, i - c * per, f);
      });
}

// Rows p0 .. p0 + kRows (zeros from end) of the request's cache into k_s.
template <typename T>
__device__ __forceinline__ void load_rows(const MlaLaunch<T>& l, const int32_t* blocks, int p0, int end, int ds,
                                          float* k_s) {
  if (l.cache8) {
    load_rows_e4m3(l, blocks, p0, end, ds, k_s);
    return;
  }
  const int D = l.d.latent(), bs = l.block_size;
  if (D % 8 == 0) {  // 8 elements a load (one 16-byte vector of bf16, two of f32)
    struct Raw {
      uint4 v[8 / kVecElems<T>];
    };
    const int per = D / 8;
    batched_copy<kRowBatch>(
        kRows * per,
        [&](int i) {
          const int c = i / per, p = p0 + c;
          Raw r{};
          if (p < end) {
            const int64_t slot = int64_t(blocks[p / bs]) * bs + p % bs;
            const uint4* src = reinterpret_cast<const uint4*>(l.cache + slot * D + (i - c * per) * 8);
#pragma unroll
            for (int k = 0; k < 8 / kVecElems<T>; ++k) r.v[k] = src[k];
          }
          return r;
        },
        [&](int i, const Raw& r) {
          const int c = i / per;
          float f[8];
#pragma unroll
          for (int k = 0; k < 8 / kVecElems<T>; ++k) unpack_vec<T>(r.v[k], f + k * kVecElems<T>);
          store_chunk(k_s, c, ds, i - c * per, f);
        });
    return;
  }
  batched_copy<kRowBatch>(
      kRows * D,
      [&](int i) {
        const int c = i / D, p = p0 + c;
        return p < end ? to_f(l.cache[(int64_t(blocks[p / bs]) * bs + p % bs) * D + i - c * D]) : 0.0f;
      },
      [&](int i, float v) { k_s[(i / D) * ds + i % D] = v; });
}

// The q_latent rows of heads h0 .. h0 + hg of token t into q_s ([kHeadGroup][dp], zeros past them).
template <typename T>
__device__ __forceinline__ void load_q(const MlaLaunch<T>& l, int t, int h0, int hg, int dp, float* q_s) {
  const int D = l.d.latent();
  const float* src = l.q_latent + (int64_t(t) * l.d.heads + h0) * D;  // the group's rows, contiguous
  if (D % 4 == 0) {                                                   // dp == D
    const float4* src4 = reinterpret_cast<const float4*>(src);
    const int real = hg * D / 4;
    batched_copy<kQBatch>(
        kHeadGroup * D / 4, [&](int i) { return i < real ? src4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f); },
        [&](int i, const float4& v) { reinterpret_cast<float4*>(q_s)[i] = v; });
    return;
  }
  batched_copy<kQBatch>(
      kHeadGroup * dp,
      [&](int i) {
        const int g = i / dp, e = i - g * dp;
        return g < hg && e < D ? src[g * D + e] : 0.0f;
      },
      [&](int i, float v) { q_s[i] = v; });
}

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
__device__ __forceinline__ void fma4(float4& acc, float p, const float4& v) {
  acc.x += p * v.x, acc.y += p * v.y, acc.z += p * v.z, acc.w += p * v.w;
}

// attend: one CTA per (token, group of kHeadGroup heads, split): multi-query attention over the
// split's share of the token's context (rows up to its position), every row loaded once for the
// group (scores over L + R dims, values the first L). Warp w owns heads 2w and 2w + 1 through a
// step: their 2 x kRows scores (a lane 2 heads x 2 rows over a quarter of the columns), their
// online softmax (a lane a (head, row)) and their values (a lane float4 columns), so only the row
// loads need the whole CTA. One split writes the normalised output into o_latent; several write
// their unnormalised sums and (max, sum) into o_part / ml_part.
template <typename T>
__global__ void __launch_bounds__(kThreads) attend_kernel(MlaLaunch<T> l) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const MlaDims& d = l.d;
  const AttendLayout lay(d);
  const int t = blockIdx.x, h0 = blockIdx.y * kHeadGroup, split = blockIdx.z, S = l.splits;
  const int L = d.kv_lora_rank, D = d.latent(), dp = lay.dp, ds = lay.ds;
  const int hg = min(kHeadGroup, d.heads - h0), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* q_s = smem;                   // [kHeadGroup][dp]
  float* k_s = q_s + kHeadGroup * dp;  // [kRows][ds]
  float* p_s = k_s + kRows * ds;       // [kHeadGroup][kRows]
  pdl_wait();
  pdl_trigger();
  const int r = t < l.qsl[l.num_reqs] ? find_request(l.qsl, l.num_reqs, t) : -1;  // -1: a padded token
  int begin = 0, end = 0;
  if (r >= 0) {
    const int q_len = l.qsl[r + 1] - l.qsl[r], n = l.seq_lens[r] - q_len + (t - l.qsl[r]) + 1;
    const int chunk = ((n + S - 1) / S + kRows - 1) / kRows * kRows;
    begin = min(n, split * chunk), end = min(n, begin + chunk);
  }
  load_q(l, t, h0, hg, dp, q_s);
  for (int i = threadIdx.x; i < kRows * (ds - D); i += kThreads)  // the padding columns stay zero
    k_s[(i / (ds - D)) * ds + D + i % (ds - D)] = 0.0f;
  const int dq = lane % 4, rp = lane / 4;  // score lanes: float4 columns dq + 4i, rows rp and rp + 8
  const float4* qa = reinterpret_cast<const float4*>(q_s + 2 * warp * dp);
  const float4* qb = reinterpret_cast<const float4*>(q_s + (2 * warp + 1) * dp);
  const float4* k4 = reinterpret_cast<const float4*>(k_s);
  float* p_w = p_s + 2 * warp * kRows;  // this warp's [2][kRows] probabilities
  float m = -FLT_MAX, sum = 0.0f;       // softmax lanes: head 2w + lane / 16, row lane % 16
  float4 acc[2][kAcc4] = {};            // heads 2w, 2w + 1; float4 columns lane + 32 k
  for (int p0 = begin; p0 < end; p0 += kRows) {
    __syncthreads();  // the previous step's rows are consumed
    load_rows(l, r >= 0 ? l.block_table + int64_t(r) * l.max_blocks : nullptr, p0, end, ds, k_s);
    __syncthreads();
    {
      const float4 *ka = k4 + rp * (ds / 4), *kb = k4 + (rp + 8) * (ds / 4);
      float s00 = 0.0f, s01 = 0.0f, s10 = 0.0f, s11 = 0.0f;  // s[head][row]
      for (int i = dq; i < dp / 4; i += 4) {
        const float4 x = qa[i], y = qb[i], u = ka[i], v = kb[i];
        s00 += dot4(x, u), s01 += dot4(x, v), s10 += dot4(y, u), s11 += dot4(y, v);
      }
#pragma unroll
      for (int o = 1; o < 4; o <<= 1) {
        s00 += __shfl_xor_sync(0xffffffffu, s00, o), s01 += __shfl_xor_sync(0xffffffffu, s01, o);
        s10 += __shfl_xor_sync(0xffffffffu, s10, o), s11 += __shfl_xor_sync(0xffffffffu, s11, o);
      }
      if (dq == 0) p_w[rp] = s00, p_w[rp + 8] = s01, p_w[kRows + rp] = s10, p_w[kRows + rp + 8] = s11;
    }
    __syncwarp();
    float corr;
    {
      const bool valid = p0 + lane % kRows < end;
      const float sc = valid ? p_w[lane] * d.scale : -FLT_MAX;
      float mx = sc;
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      mx = fmaxf(mx, m);
      corr = __expf(m - mx);
      const float w = valid ? __expf(sc - mx) : 0.0f;
      float ws = w;
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) ws += __shfl_xor_sync(0xffffffffu, ws, o);
      sum = sum * corr + ws, m = mx;
      p_w[lane] = w;
    }
    __syncwarp();
    const float ca = __shfl_sync(0xffffffffu, corr, 0), cb = __shfl_sync(0xffffffffu, corr, 16);
#pragma unroll
    for (int k = 0; k < kAcc4; ++k) {
      acc[0][k].x *= ca, acc[0][k].y *= ca, acc[0][k].z *= ca, acc[0][k].w *= ca;
      acc[1][k].x *= cb, acc[1][k].y *= cb, acc[1][k].z *= cb, acc[1][k].w *= cb;
    }
    for (int c = 0; c < kRows; ++c) {
      const float pa = p_w[c], pb = p_w[kRows + c];
      const float4* row = k4 + c * (ds / 4);
#pragma unroll
      for (int k = 0; k < kAcc4; ++k) {
        if ((lane + 32 * k) * 4 >= L) break;
        const float4 v = row[lane + 32 * k];
        fma4(acc[0][k], pa, v), fma4(acc[1][k], pb, v);
      }
    }
  }
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int g = 2 * warp + hh, h = h0 + g;
    const float mh = __shfl_sync(0xffffffffu, m, 16 * hh), lh = __shfl_sync(0xffffffffu, sum, 16 * hh);
    if (g >= hg) continue;
    // One split: the normalised output (a padded token, no rows: zeros, which expand turns into
    // zero rows). Several: the unnormalised sums and (max, sum).
    const int64_t row = S == 1 ? int64_t(t) * d.heads + h : (int64_t(t) * S + split) * d.heads + h;
    const float inv = S > 1 ? 1.0f : lh > 0.0f ? 1.0f / lh : 0.0f;
    float4* o = reinterpret_cast<float4*>((S == 1 ? l.o_latent : l.o_part) + row * L);
#pragma unroll
    for (int k = 0; k < kAcc4; ++k) {
      if ((lane + 32 * k) * 4 >= L) break;
      const float4 a = acc[hh][k];
      o[lane + 32 * k] = make_float4(a.x * inv, a.y * inv, a.z * inv, a.w * inv);
    }
    if (S > 1 && lane == 0) l.ml_part[2 * row] = mh, l.ml_part[2 * row + 1] = lh;
  }
}

// merge (splits > 1): the splits' partial outputs of one (token, head) into o_latent, each
// weighted by exp(m_s - max) / sum_s exp(m_s - max) l_s (zeros for a token without rows).
template <typename T>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(MlaLaunch<T> l) {
  __shared__ float w_s[kMlaMaxSplits];
  __shared__ int active_s;
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, h = blockIdx.y, S = l.splits, H = l.d.heads, L = l.d.kv_lora_rank;
  const int64_t row0 = int64_t(t) * S * H + h;  // split u: row0 + u H
  if (threadIdx.x < 32) {                       // kMlaMaxSplits == 32: a lane a split
    const int s = threadIdx.x;
    const int64_t row = row0 + int64_t(s) * H;
    const float m = s < S ? l.ml_part[2 * row] : -FLT_MAX, n = s < S ? l.ml_part[2 * row + 1] : 0.0f;
    const float mx = warp_max(n > 0.0f ? m : -FLT_MAX);
    const float w = n > 0.0f ? __expf(m - mx) : 0.0f;
    const float den = warp_sum(w * n);
    if (s < S) w_s[s] = den > 0.0f ? w / den : 0.0f;
    // The splits holding rows are a prefix (attend cuts the rows in order): merge reads only those.
    const unsigned held = __ballot_sync(0xffffffffu, s < S && n > 0.0f);
    if (s == 0) active_s = 32 - __clz(held);
  }
  __syncthreads();
  const int active = active_s;
  const float4* part = reinterpret_cast<const float4*>(l.o_part);
  for (int e4 = threadIdx.x; e4 < L / 4; e4 += kMergeThreads) {
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int u = 0;
    for (; u + kMergeBatch <= active; u += kMergeBatch) {
      float4 v[kMergeBatch];
#pragma unroll
      for (int k = 0; k < kMergeBatch; ++k) v[k] = part[(row0 + int64_t(u + k) * H) * (L / 4) + e4];
#pragma unroll
      for (int k = 0; k < kMergeBatch; ++k) fma4(o, w_s[u + k], v[k]);
    }
    for (; u < active; ++u) fma4(o, w_s[u], part[(row0 + int64_t(u) * H) * (L / 4) + e4]);
    reinterpret_cast<float4*>(l.o_latent)[(int64_t(t) * H + h) * (L / 4) + e4] = o;
  }
}

// expand: a CTA holds kExpandRows rows of one head's W_UV in registers (a warp two rows, a lane
// 8-column segments) and applies them to up to kTokenTile tokens' latent outputs (o_latent),
// kGroupTokens at a time.
template <typename T>
__global__ void __launch_bounds__(kThreads) expand_kernel(MlaLaunch<T> l) {
  __shared__ __align__(16) float o_s[kGroupTokens][kMlaMaxLoraRank];
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
  pdl_wait();  // the weights above are constant; o_latent comes from attend / merge
  pdl_trigger();
  const float4* o_lat = reinterpret_cast<const float4*>(l.o_latent);
  for (int ti0 = 0; ti0 < nt; ti0 += kGroupTokens) {
    const int g = min(kGroupTokens, nt - ti0), L4 = L / 4;
    __syncthreads();  // the previous group's o_s is consumed
    batched_copy<kGroupTokens * kMlaMaxLoraRank / 4 / kThreads>(
        g * L4, [&](int i) { return o_lat[(int64_t(t0 + ti0 + i / L4) * d.heads + h) * L4 + i % L4]; },
        [&](int i, const float4& v) { reinterpret_cast<float4*>(o_s[i / L4])[i % L4] = v; });
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

// gemms_apart: o_latent [T, H, L] (f32) rounded to bf16 into q_latent's memory, 8 values a thread.
template <typename T>
__global__ void __launch_bounds__(kThreads) round_o_latent_kernel(MlaLaunch<T> l) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= int64_t(l.num_tokens) * l.d.heads * l.d.kv_lora_rank / 8) return;
  float f[8];
  load8(l.o_latent + 8 * i, f);
  store8(reinterpret_cast<uint16_t*>(l.q_latent) + 8 * i, f);
}

size_t attend_smem(const MlaDims& d) {
  const AttendLayout lay(d);
  return sizeof(float) * (size_t(kHeadGroup) * lay.dp + size_t(kRows) * lay.ds + kHeadGroup * kRows);
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

namespace {

template <typename T>
bool launch_ok(const MlaLaunch<T>& l) {
  return l.splits >= 1 && l.splits <= kMlaMaxSplits && (l.splits == 1 || l.num_tokens * l.splits <= kMlaSplitRows) &&
         ((!l.tensor_core && !l.gemms_apart) || std::is_same_v<T, uint16_t>);
}

}  // namespace

// Programmatic dependent launches (ops/cuda/launch.cuh): absorb and expand load their weights
// while the kernel before them finishes.
template <typename T>
cudaError_t launch_mla_absorb(const MlaLaunch<T>& l, cudaStream_t stream) {
  if (l.num_tokens == 0) return cudaSuccess;
  if (!launch_ok(l)) return cudaErrorInvalidValue;
  const unsigned tiles = unsigned((l.num_tokens + kTokenTile - 1) / kTokenTile);
  const unsigned cols = l.gemms_apart ? 1u : unsigned((l.d.kv_lora_rank + kAbsorbCols - 1) / kAbsorbCols);
  cudaError_t err = launch_pdl(latent_kernel<T>, dim3(unsigned(l.num_tokens)), dim3(kThreads), 0, stream, l);
  if (err == cudaSuccess)
    err = launch_pdl(absorb_kernel<T>, dim3(unsigned(l.d.heads), cols, tiles), dim3(kThreads), 0, stream, l);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_mla_attend(const MlaLaunch<T>& l, cudaStream_t stream) {
  if (l.num_tokens == 0) return cudaSuccess;
  if (!launch_ok(l)) return cudaErrorInvalidValue;
  const MlaDims& d = l.d;
  const unsigned tiles = unsigned((l.num_tokens + kTokenTile - 1) / kTokenTile), H = unsigned(d.heads);
  const dim3 attend(unsigned(l.num_tokens), unsigned((d.heads + kHeadGroup - 1) / kHeadGroup), unsigned(l.splits));
  const dim3 expand(H, unsigned((d.v + kExpandRows - 1) / kExpandRows), tiles);
  cudaError_t err = cudaSuccess;
  if (l.tensor_core) {
    if constexpr (std::is_same_v<T, uint16_t>) err = launch_mla_attend_mma(l, stream);  // bf16 only (checked above)
  } else if (err == cudaSuccess) {
    err = launch_pdl(attend_kernel<T>, attend, dim3(kThreads), attend_smem(d), stream, l);
  }
  if (err == cudaSuccess && l.splits > 1)
    err = launch_pdl(merge_kernel<T>, dim3(unsigned(l.num_tokens), H), dim3(kMergeThreads), 0, stream, l);
  if (err == cudaSuccess && l.gemms_apart) {
    const int64_t vecs = int64_t(l.num_tokens) * d.heads * d.kv_lora_rank / 8;
    err = launch_pdl(round_o_latent_kernel<T>, dim3(unsigned((vecs + kThreads - 1) / kThreads)), dim3(kThreads), 0,
                     stream, l);
  } else if (err == cudaSuccess) {
    err = launch_pdl(expand_kernel<T>, expand, dim3(kThreads), 0, stream, l);
  }
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

template <typename T>
cudaError_t prepare_mla(const MlaDims& d) {
  return cudaFuncSetAttribute(attend_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(attend_smem(d)));
}

template cudaError_t prepare_mla<float>(const MlaDims&);
template cudaError_t prepare_mla<uint16_t>(const MlaDims&);
template cudaError_t launch_mla_absorb<float>(const MlaLaunch<float>&, cudaStream_t);
template cudaError_t launch_mla_absorb<uint16_t>(const MlaLaunch<uint16_t>&, cudaStream_t);
template cudaError_t launch_mla_attend<float>(const MlaLaunch<float>&, cudaStream_t);
template cudaError_t launch_mla_attend<uint16_t>(const MlaLaunch<uint16_t>&, cudaStream_t);

}  // namespace gs::cuda
