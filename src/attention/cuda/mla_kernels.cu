// Implements attention/cuda/mla_kernels.h: four kernels per layer.
//   latent: each real token's kv_a row -> kv_a_layernorm(c_kv) and rotated k_pe, into its slot;
//   absorb: q_lat = W_UK^T q_nope and the rotated q_pe of every (token, head) into q_latent;
//   attend: one CTA per (token, group of 16 heads): multi-query attention over the request's
//           cached latent rows up to the token's position, every row loaded once for the group
//           (scores over L + R dims, values the first L), into o_latent;
//   expand: out = W_UV o_lat per (token, head).
#include <cfloat>

#include "attention/cuda/find_request.cuh"
#include "attention/cuda/mla_kernels.h"
#include "ops/cuda/device_util.cuh"

namespace gs::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kHeadGroup = 16;                         // heads one attend CTA serves
constexpr int kRows = 16;                              // cached rows one attend step loads
constexpr int kSub = kThreads / kHeadGroup;            // threads per head in the value update
constexpr int kAccPerThread = kMlaMaxLoraRank / kSub;  // accumulators per thread

__device__ __forceinline__ void rotate_pair(float* x, int i, int pos, const MlaDims& d, const float* inv_freq) {
  const float angle = float(pos) * inv_freq[i];
  float sn, c;
  sincosf(angle, &sn, &c);
  c *= d.rope_scale, sn *= d.rope_scale;
  const int half = d.rope / 2;
  const int a = d.interleave ? 2 * i : i, b = d.interleave ? 2 * i + 1 : i + half;
  const float x0 = x[a], x1 = x[b];
  x[a] = x0 * c - x1 * sn;
  x[b] = x1 * c + x0 * sn;
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
  if (threadIdx.x < d.rope / 2) rotate_pair(pe, threadIdx.x, l.positions[t], d, l.inv_freq);
  __syncthreads();
  for (int i = threadIdx.x; i < d.rope; i += kThreads) row[L + i] = from_f<T>(pe[i]);
}

template <typename T>
__global__ void absorb_kernel(MlaLaunch<T> l) {
  const int t = blockIdx.x, h = blockIdx.y;
  const MlaDims& d = l.d;
  const int L = d.kv_lora_rank, qk = d.nope + d.rope;
  __shared__ float qn[256];
  __shared__ float pe[256];
  const T* q = l.q + (int64_t(t) * d.heads + h) * qk;
  for (int i = threadIdx.x; i < d.nope; i += kThreads) qn[i] = to_f(q[i]);
  for (int i = threadIdx.x; i < d.rope; i += kThreads) pe[i] = to_f(q[d.nope + i]);
  __syncthreads();
  if (threadIdx.x < d.rope / 2) rotate_pair(pe, threadIdx.x, l.positions[t], d, l.inv_freq);
  __syncthreads();
  float* out = l.q_latent + (int64_t(t) * d.heads + h) * d.latent();
  const T* w = l.kv_b + int64_t(h) * (d.nope + d.v) * L;  // W_UK: the head's first `nope` rows
  for (int c = threadIdx.x; c < L; c += kThreads) {
    float acc = 0.0f;
    for (int j = 0; j < d.nope; ++j) acc += qn[j] * to_f(w[int64_t(j) * L + c]);
    out[c] = acc;
  }
  for (int i = threadIdx.x; i < d.rope; i += kThreads) out[L + i] = pe[i];
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attend_kernel(MlaLaunch<T> l) {
  extern __shared__ float smem[];
  const MlaDims& d = l.d;
  const int t = blockIdx.x, h0 = blockIdx.y * kHeadGroup, L = d.kv_lora_rank, D = d.latent(), DS = D + 1;
  const int hg = min(kHeadGroup, d.heads - h0);
  float* q_s = smem;                      // [kHeadGroup][D]
  float* k_s = q_s + kHeadGroup * D;      // [kRows][D + 1]
  float* p_s = k_s + kRows * DS;          // [kHeadGroup][kRows]
  float* m_s = p_s + kHeadGroup * kRows;  // [kHeadGroup]
  float* l_s = m_s + kHeadGroup;          // [kHeadGroup]
  float* c_s = l_s + kHeadGroup;          // [kHeadGroup]
  const int hh = threadIdx.x / kSub, sub = threadIdx.x % kSub;
  const int r = t < l.qsl[l.num_reqs] ? find_request(l.qsl, l.num_reqs, t) : -1;  // -1: a padded token
  float* o = l.o_latent + (int64_t(t) * d.heads + h0) * L;
  if (r < 0) {  // a padded token: zeros, which expand turns into zero rows
    for (int i = threadIdx.x; i < hg * L; i += kThreads) o[i] = 0.0f;
    return;
  }
  const int q_len = l.qsl[r + 1] - l.qsl[r], last = l.seq_lens[r] - q_len + (t - l.qsl[r]);
  for (int i = threadIdx.x; i < kHeadGroup * D; i += kThreads)
    q_s[i] = i / D < hg ? l.q_latent[(int64_t(t) * d.heads + h0) * D + i] : 0.0f;
  if (threadIdx.x < kHeadGroup) m_s[threadIdx.x] = -FLT_MAX, l_s[threadIdx.x] = 0.0f;
  float acc[kAccPerThread];
#pragma unroll
  for (int k = 0; k < kAccPerThread; ++k) acc[k] = 0.0f;
  const int32_t* blocks = l.block_table + int64_t(r) * l.max_blocks;
  for (int p0 = 0; p0 <= last; p0 += kRows) {
    __syncthreads();  // the previous step's rows and probabilities are consumed
    for (int i = threadIdx.x; i < kRows * D; i += kThreads) {
      const int c = i / D, e = i % D, p = p0 + c;
      float v = 0.0f;
      if (p <= last) {
        const int64_t slot = int64_t(blocks[p / l.block_size]) * l.block_size + p % l.block_size;
        v = to_f(l.cache[slot * D + e]);
      }
      k_s[c * DS + e] = v;
    }
    __syncthreads();
    {  // one (head, row) score per thread: kHeadGroup x kRows == kThreads
      const int sh = threadIdx.x / kRows, sc = threadIdx.x % kRows;
      float s = 0.0f;
      for (int e = 0; e < D; ++e) s += q_s[sh * D + e] * k_s[sc * DS + e];
      p_s[sh * kRows + sc] = p0 + sc <= last ? s * d.scale : -FLT_MAX;
    }
    __syncthreads();
    if (threadIdx.x < kHeadGroup) {
      const int g = threadIdx.x;
      float mx = m_s[g];
      for (int c = 0; c < kRows; ++c) mx = fmaxf(mx, p_s[g * kRows + c]);
      const float corr = __expf(m_s[g] - mx);
      float sum = 0.0f;
      for (int c = 0; c < kRows; ++c) {
        const float w = p0 + c <= last ? __expf(p_s[g * kRows + c] - mx) : 0.0f;
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
      for (int c = 0; c < kRows; ++c) a += p_s[hh * kRows + c] * k_s[c * DS + e];
      acc[k] = a;
    }
  }
  __syncthreads();
  if (hh < hg) {
    const float inv = 1.0f / l_s[hh];
#pragma unroll
    for (int k = 0; k < kAccPerThread; ++k) {
      const int e = sub + k * kSub;
      if (e >= L) break;
      o[int64_t(hh) * L + e] = acc[k] * inv;
    }
  }
}

template <typename T>
__global__ void expand_kernel(MlaLaunch<T> l) {
  const int t = blockIdx.x, h = blockIdx.y;
  const MlaDims& d = l.d;
  const int L = d.kv_lora_rank, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* o = l.o_latent + (int64_t(t) * d.heads + h) * L;
  const T* w = l.kv_b + (int64_t(h) * (d.nope + d.v) + d.nope) * L;  // W_UV: the head's last `v` rows
  for (int j = warp; j < d.v; j += kThreads / 32) {
    float acc = 0.0f;
    for (int e = lane; e < L; e += 32) acc += to_f(w[int64_t(j) * L + e]) * o[e];
    acc = warp_sum(acc);
    if (lane == 0) l.out[(int64_t(t) * d.heads + h) * d.v + j] = from_f<T>(acc);
  }
}

size_t attend_smem(const MlaDims& d) {
  const int D = d.latent();
  return sizeof(float) * (size_t(kHeadGroup) * D + size_t(kRows) * (D + 1) + kHeadGroup * kRows + 3 * kHeadGroup);
}

}  // namespace

bool mla_dims_supported(const MlaDims& d) {
  return d.heads > 0 && d.nope > 0 && d.nope <= 256 && d.rope > 0 && d.rope <= 256 && d.rope % 2 == 0 && d.v > 0 &&
         d.kv_lora_rank > 0 && d.kv_lora_rank <= kMlaMaxLoraRank && attend_smem(d) <= 200 * 1024;
}

template <typename T>
cudaError_t launch_mla(const MlaLaunch<T>& l, cudaStream_t stream) {
  if (l.num_tokens == 0) return cudaSuccess;
  const MlaDims& d = l.d;
  const dim3 per_head(unsigned(l.num_tokens), unsigned(d.heads));
  const dim3 groups(unsigned(l.num_tokens), unsigned((d.heads + kHeadGroup - 1) / kHeadGroup));
  latent_kernel<T><<<l.num_tokens, kThreads, 0, stream>>>(l);
  absorb_kernel<T><<<per_head, kThreads, 0, stream>>>(l);
  attend_kernel<T><<<groups, kThreads, attend_smem(d), stream>>>(l);
  expand_kernel<T><<<per_head, kThreads, 0, stream>>>(l);
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
