// The fused experts of a mixture-of-experts layer (moe_kernels.h): align, the grouped GEMMs
// (bf16: moe_grouped_gemm.cu on tensor cores; f32: the grouped GEMVs below), reduce.
#include <algorithm>
#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/moe_index.cuh"
#include "ops/cuda/moe_kernels.h"

namespace gs::cuda {

namespace {

constexpr int kWarps = 8;  // rows a block of the GEMVs (one warp a row)
constexpr int kAlignThreads = 1024;
constexpr int kGemvChunk = 64;  // pairs a work item of the GEMVs

// Counts the pairs of each expert, lays out offsets and work items of `chunk` pairs (an
// exclusive scan by one warp, each lane over a contiguous run of experts), then sorts the pairs.
// Pairs of another rank's expert (ids < 0) are neither counted nor sorted: no item holds them.
__global__ void moe_align_kernel(const int32_t* ids, int P, int E, int chunk, int32_t* index) {
  __shared__ int count[kMaxMoeExperts], cursor[kMaxMoeExperts];
  pdl_wait();
  pdl_trigger();
  const MoeIndex ix(index, P, E);
  const auto expert = [&](int p) { return min(ids[p], E - 1); };  // < 0: another rank's
  for (int e = int(threadIdx.x); e < E; e += int(blockDim.x)) count[e] = 0;
  __syncthreads();
  for (int p = int(threadIdx.x); p < P; p += int(blockDim.x))
    if (const int e = expert(p); e >= 0) atomicAdd(&count[e], 1);
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x), per = (E + 31) / 32, e0 = min(lane * per, E), e1 = min(e0 + per, E);
    int pairs = 0, items = 0;
    for (int e = e0; e < e1; ++e) pairs += count[e], items += (count[e] + chunk - 1) / chunk;
    int pi = pairs, ii = items;  // inclusive scans over the lanes
    for (int o = 1; o < 32; o <<= 1) {
      const int a = __shfl_up_sync(0xffffffffu, pi, o), b = __shfl_up_sync(0xffffffffu, ii, o);
      if (lane >= o) pi += a, ii += b;
    }
    pi -= pairs, ii -= items;
    for (int e = e0; e < e1; ++e) {
      ix.offsets[e] = cursor[e] = pi;
      ix.chunks[e] = ii;
      pi += count[e], ii += (count[e] + chunk - 1) / chunk;
    }
    if (lane == 31) ix.offsets[E] = pi, ix.chunks[E] = ii;
  }
  __syncthreads();
  for (int p = int(threadIdx.x); p < P; p += int(blockDim.x))
    if (const int e = expert(p); e >= 0) ix.sorted[atomicAdd(&cursor[e], 1)] = p;
}

template <int NT>
__device__ __forceinline__ void warp_sum_n(float* v) {
#pragma unroll
  for (int i = 0; i < NT; ++i) v[i] = warp_sum(v[i]);
}

// act[pair, row] = act(gate_e[row] . x[t] + bg) * (up_e[row] . x[t] + bu) for the item's pairs, NT a
// pass (biases and the clamped SwiGLU: gpt-oss).
template <typename T, int NT, GatedActivation A>
__global__ void moe_gate_up_kernel(const T* x, const T* w, int32_t* index, int P, int E, int k, int I, int H,
                                   T* act_out, MoeEpilogue epi) {
  __shared__ int stage[kMoeStageInts];
  pdl_wait();
  const MoeIndex ix(index, P, E);
  int e = 0, begin = 0, end = 0;
  if (!moe_block_item(ix, E, kGemvChunk, stage, e, begin, end)) return;
  const int lane = threadIdx.x & 31, row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (row >= I) return;
  const T* wg = w + (int64_t(e) * 2 * I + row) * H;
  const T* wu = wg + int64_t(I) * H;
  for (int base = begin; base < end; base += NT) {
    const int n = min(NT, end - base);
    int pair[NT];
    float g[NT], u[NT];
#pragma unroll
    for (int i = 0; i < NT; ++i) pair[i] = ix.sorted[base + (i < n ? i : 0)], g[i] = u[i] = 0.0f;
#pragma unroll 2
    for (int c = lane * 8; c < H; c += 256) {
      float a[8], b[8];
      load8(wg + c, a);
      load8(wu + c, b);
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        float xv[8];
        load8(x + int64_t(pair[i] / k) * H + c, xv);
#pragma unroll
        for (int j = 0; j < 8; ++j) g[i] += a[j] * xv[j], u[i] += b[j] * xv[j];
      }
    }
    warp_sum_n<NT>(g);
    warp_sum_n<NT>(u);
    if (lane == 0)
      for (int i = 0; i < n; ++i) {
        const float* b = epi.gate_up_bias ? epi.gate_up_bias + int64_t(e) * 2 * I + row : nullptr;
        act_out[int64_t(pair[i]) * I + row] = from_f<T>(expert_act<A>(g[i], u[i], b, I, epi.swiglu_limit));
      }
  }
}

// pair_out[pair, row] = weight[pair] * (down_e[row] . act[pair] + bias_e[row]) for the item's pairs.
template <typename T, int NT>
__global__ void moe_down_kernel(const T* act, const T* w, const float* weights, int32_t* index, int P, int E, int I,
                                int H, float* pair_out, const float* down_bias) {
  __shared__ int stage[kMoeStageInts];
  pdl_wait();
  const MoeIndex ix(index, P, E);
  int e = 0, begin = 0, end = 0;
  if (!moe_block_item(ix, E, kGemvChunk, stage, e, begin, end)) return;
  const int lane = threadIdx.x & 31, row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (row >= H) return;
  const T* wd = w + (int64_t(e) * H + row) * I;
  for (int base = begin; base < end; base += NT) {
    const int n = min(NT, end - base);
    int pair[NT];
    float d[NT];
#pragma unroll
    for (int i = 0; i < NT; ++i) pair[i] = ix.sorted[base + (i < n ? i : 0)], d[i] = 0.0f;
#pragma unroll 2
    for (int c = lane * 8; c < I; c += 256) {
      float a[8];
      load8(wd + c, a);
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        float v[8];
        load8(act + int64_t(pair[i]) * I + c, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) d[i] += a[j] * v[j];
      }
    }
    warp_sum_n<NT>(d);
    if (lane == 0)
      for (int i = 0; i < n; ++i)
        pair_out[int64_t(pair[i]) * H + row] =
            weights[pair[i]] * (d[i] + (down_bias ? down_bias[int64_t(e) * H + row] : 0.0f));
  }
}

// The dense form's rows of the pairs (moe_dense_reduce): row (e, t) of down_out [E, T, H], its
// routing weight and expert e's down bias applied here.
struct DenseRows {
  const float* weights = nullptr;  // null: the sorted path's pair_out, weighted already
  const float* bias = nullptr;
  int T = 0, E = 0;
};

// out[t, h] = sum_j pair_out[t k + j, h] + f(t) shared[t, h] over the pairs whose ids are >= 0
// (the others are another rank's: nothing wrote their rows); one thread 8 columns. The sorted
// path's rows load whatever their ids, so that a token's k loads are in flight together, and
// only with other_ranks (expert parallelism) do the ids decide which of them count.
template <typename T>
__global__ void moe_reduce_kernel(const float* pair_out, const int32_t* ids, bool other_ranks, const T* shared,
                                  const float* shared_gate, int gate_stride, int k, int H, T* out, int64_t n8,
                                  DenseRows dense) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n8) return;
  const int64_t t = i / (H / 8);
  const int h = int(i % (H / 8)) * 8;
  float acc[8] = {};
  for (int j = 0; j < k; ++j) {
    if (dense.weights) {
      const int id = ids[t * k + j];
      if (id < 0) continue;
      const int64_t e = min(id, dense.E - 1);
      const float w = dense.weights[t * k + j];
      float v[8], b[8] = {};
      load8(pair_out + (e * dense.T + t) * H + h, v);
      if (dense.bias) load8(dense.bias + e * H + h, b);
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[c] += w * (v[c] + b[c]);
      continue;
    }
    float v[8];
    load8(pair_out + (t * k + j) * H + h, v);
    const bool mine = !other_ranks || ids[t * k + j] >= 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[c] += mine ? v[c] : 0.0f;
  }
  if (shared) {
    const float f = shared_gate ? 1.0f / (1.0f + expf(-shared_gate[t * gate_stride])) : 1.0f;
    float sv[8];
    load8(shared + t * H + h, sv);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += f * sv[j];
  }
  store8(out + t * H + h, acc);
}

template <typename T, int NT>
cudaError_t launch_gemvs(GatedActivation act, const T* x, const T* gate_up, const T* down, const float* weights,
                         T* act_scratch, float* pair_out, int32_t* index, int P, int k, int E, int I, int H,
                         const MoeEpilogue& epi, cudaStream_t s) {
  const int items = moe_max_items(P, E, kGemvChunk);
  const dim3 gu((I + kWarps - 1) / kWarps, items), dn((H + kWarps - 1) / kWarps, items);
  const auto gate_up_kernel = [&](auto* kernel) {
    return launch_pdl(kernel, gu, 32 * kWarps, 0, s, x, gate_up, index, P, E, k, I, H, act_scratch, epi);
  };
  cudaError_t err = act == GatedActivation::Silu ? gate_up_kernel(moe_gate_up_kernel<T, NT, GatedActivation::Silu>)
                    : act == GatedActivation::ClampedSwiglu
                        ? gate_up_kernel(moe_gate_up_kernel<T, NT, GatedActivation::ClampedSwiglu>)
                        : gate_up_kernel(moe_gate_up_kernel<T, NT, GatedActivation::GeluTanh>);
  if (err != cudaSuccess) return err;
  return launch_pdl(moe_down_kernel<T, NT>, dn, 32 * kWarps, 0, s, act_scratch, down, weights, index, P, E, I, H,
                    pair_out, epi.down_bias);
}

template <typename T>
cudaError_t launch_gemvs(const MoeKernelOptions& opts, GatedActivation act, const T* x, const T* gate_up, const T* down,
                         const float* weights, T* act_scratch, float* pair_out, int32_t* index, int P, int k, int E,
                         int I, int H, const MoeEpilogue& epi, cudaStream_t s) {
  switch (opts.tokens_per_pass) {
    case 1:
      return launch_gemvs<T, 1>(act, x, gate_up, down, weights, act_scratch, pair_out, index, P, k, E, I, H, epi, s);
    case 2:
      return launch_gemvs<T, 2>(act, x, gate_up, down, weights, act_scratch, pair_out, index, P, k, E, I, H, epi, s);
    case 4:
      return launch_gemvs<T, 4>(act, x, gate_up, down, weights, act_scratch, pair_out, index, P, k, E, I, H, epi, s);
    default:
      return launch_gemvs<T, 8>(act, x, gate_up, down, weights, act_scratch, pair_out, index, P, k, E, I, H, epi, s);
  }
}

// The grouped GEMMs of the pairs: tensor cores for bf16, the GEMVs for f32.
template <typename T>
cudaError_t launch_experts(const MoeKernelOptions& opts, GatedActivation act, const T* x, const MoeWeight& gate_up,
                           const MoeWeight& down, const float* weights, T* act_scratch, float* pair_out, int32_t* index,
                           int P, int k, int E, int I, int H, int chunk, const MoeEpilogue& epi, cudaStream_t s) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    const cudaError_t err = moe_gate_up_mma(act, x, gate_up, index, act_scratch, P, k, E, I, H, chunk, epi, s);
    if (err != cudaSuccess) return err;
    return moe_down_mma(act_scratch, down, weights, index, pair_out, P, E, I, H, chunk, epi, s);
  } else {
    if (gate_up.scales || down.scales) return cudaErrorInvalidValue;  // e4m3 experts need bf16 compute
    return launch_gemvs(opts, act, x, static_cast<const T*>(gate_up.data), static_cast<const T*>(down.data), weights,
                        act_scratch, pair_out, index, P, k, E, I, H, epi, s);
  }
}

template <typename T>
cudaError_t launch_reduce(const float* pair_out, const int32_t* ids, bool other_ranks, const T* shared,
                          const float* shared_gate, int shared_gate_stride, int T_, int k, int H, T* out,
                          const DenseRows& dense, cudaStream_t s) {
  const int64_t n8 = int64_t(T_) * (H / 8);
  return launch_pdl(moe_reduce_kernel<T>, int((n8 + 255) / 256), 256, 0, s, pair_out, ids, other_ranks, shared,
                    shared_gate, shared_gate_stride, k, H, out, n8, dense);
}

// The dense form's activation of pair blockIdx.x, in place over its expert's gate columns
// (moe_dense_act); a pair of another rank's expert (id < 0) has none.
template <GatedActivation A>
__global__ void moe_dense_act_kernel(bf16_t* gu, const int32_t* ids, int k, int E, int I, MoeEpilogue epi) {
  pdl_wait();
  pdl_trigger();
  const int p = int(blockIdx.x), t = p / k, id = ids[p];
  if (id < 0) return;
  const int e = min(id, E - 1);
  bf16_t* g = gu + (int64_t(t) * E + e) * 2 * I;
  const float* bias = epi.gate_up_bias ? epi.gate_up_bias + int64_t(e) * 2 * I : nullptr;
  for (int i = int(threadIdx.x) * 8; i < I; i += int(blockDim.x) * 8) {
    float gv[8], uv[8], o[8];
    load8(g + i, gv);
    load8(g + I + i, uv);
#pragma unroll
    for (int c = 0; c < 8; ++c) o[c] = expert_act<A>(gv[c], uv[c], bias ? bias + i + c : nullptr, I, epi.swiglu_limit);
    store8(g + i, o);
  }
}

// The small-batch path (MoeKernelOptions::direct_max_tokens): one token's pairs never share an
// expert; more tokens' rarely do where 4 T k <= `routed` (every rank's experts: a rank's share of
// the pairs over its share of the experts is as crowded). The fold's counters cover the down
// GEMM's column tiles (16 outputs or more each).
}  // namespace

bool moe_direct_path(const MoeKernelOptions& opts, int T_, int k, int routed, int H) {
  return T_ <= opts.direct_max_tokens && (T_ == 1 || 4 * T_ * k <= routed) && (H + 15) / 16 <= kMoeFoldCounters;
}

template <typename T>
cudaError_t moe_experts(GatedActivation act, const T* x, const MoeWeight& gate_up, const MoeWeight& down,
                        const int32_t* ids, const float* weights, const T* shared, const float* shared_gate,
                        int shared_gate_stride, T* act_scratch, float* pair_out, int32_t* index, T* out, int T_, int k,
                        int E, int routed, int I, int H, const MoeKernelOptions& opts, cudaStream_t s,
                        const MoeEpilogue& epi, const MoeNormHandoff& handoff) {
  if (T_ <= 0) return cudaGetLastError();
  const int P = T_ * k;
  const bool other_ranks = routed > E;  // expert parallelism: some ids may be < 0
  const bool direct = std::is_same_v<T, bf16_t> && moe_direct_path(opts, T_, k, routed, H);
  if (handoff.residual && (!direct || T_ != 1 || !handoff.norm_w || !handoff.xn)) return cudaErrorInvalidValue;
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (direct) {
      const MoeDirect d{
          ids, MoeIndex(index, P, E).counters, shared, shared_gate, shared_gate_stride, out, k, other_ranks, handoff};
      cudaError_t err = moe_gate_up_mma(act, x, gate_up, index, act_scratch, P, k, E, I, H, 8, epi, s, &d);
      if (err != cudaSuccess) return err;
      return moe_down_mma(act_scratch, down, weights, index, pair_out, P, E, I, H, 8, epi, s, &d);
    }
  }
  // Items sized for the pairs expected on this rank's experts (all of them without expert parallelism).
  const int local = std::max(1, int(int64_t(P) * E / routed));
  const bool fp8 = gate_up.scales != nullptr, blocks = fp8 && (gate_up.groups > 1 || down.groups > 1);
  const int chunk = std::is_same_v<T, bf16_t> ? moe_mma_chunk(local, E, fp8, blocks) : kGemvChunk;
  cudaError_t err = launch_pdl(moe_align_kernel, 1, kAlignThreads, 0, s, ids, P, E, chunk, index);
  if (err != cudaSuccess) return err;
  err =
      launch_experts(opts, act, x, gate_up, down, weights, act_scratch, pair_out, index, P, k, E, I, H, chunk, epi, s);
  if (err != cudaSuccess) return err;
  return launch_reduce(pair_out, ids, other_ranks, shared, shared_gate, shared_gate_stride, T_, k, H, out, DenseRows{},
                       s);
}

cudaError_t moe_dense_act(GatedActivation act, uint16_t* gu, const int32_t* ids, int T_, int k, int E, int I,
                          const MoeEpilogue& epi, cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  const auto run = [&](auto* kernel) { return launch_pdl(kernel, T_ * k, 256, 0, s, gu, ids, k, E, I, epi); };
  switch (act) {
    case GatedActivation::GeluTanh: return run(moe_dense_act_kernel<GatedActivation::GeluTanh>);
    case GatedActivation::ClampedSwiglu: return run(moe_dense_act_kernel<GatedActivation::ClampedSwiglu>);
    default: return run(moe_dense_act_kernel<GatedActivation::Silu>);
  }
}

cudaError_t moe_dense_reduce(const float* down_out, const int32_t* ids, const float* weights, const float* down_bias,
                             const uint16_t* shared, const float* shared_gate, int shared_gate_stride, int T_, int k,
                             int E, int H, uint16_t* out, cudaStream_t s) {
  if (T_ <= 0) return cudaGetLastError();
  return launch_reduce(down_out, ids, true, shared, shared_gate, shared_gate_stride, T_, k, H, out,
                       DenseRows{weights, down_bias, T_, E}, s);
}

#define GS_MOE_INSTANTIATE(T)                                                                                        \
  template cudaError_t moe_experts<T>(GatedActivation, const T*, const MoeWeight&, const MoeWeight&, const int32_t*, \
                                      const float*, const T*, const float*, int, T*, float*, int32_t*, T*, int, int, \
                                      int, int, int, int, const MoeKernelOptions&, cudaStream_t, const MoeEpilogue&, \
                                      const MoeNormHandoff&);
GS_MOE_INSTANTIATE(bf16_t)
GS_MOE_INSTANTIATE(float)

}  // namespace gs::cuda
