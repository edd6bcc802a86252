// The epilogues of the decode linears (the M = 1 GEMV in gemv_kernels.cu and the skinny tensor-core
// GEMM in skinny_gemm.cu): an epilogue names the R weight rows an output n reads (row(n, r)) and
// stores token m's output n from their R dot products (store(n, m, v)). Plain (one row, + bias),
// gated MLP (the gate and up rows, act(g) * u) and fused QKV + RoPE (the rotary pair of rows of a
// q/k head, rotated at the token's position, q, k, v written split). With round_inputs the gated
// and RoPE epilogues first round their inputs to T, as the unfused linear's output is, so the
// fused op computes what linear + gated_activation / split_qkv_rope compute. Under tensor
// parallelism, o_proj / down at one token sum their ranks' partials (PeerSumEpilogue).
#pragma once
#include <cstdint>
#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/peer_sum.cuh"
#include "ops/gated_activation.h"

namespace gs::cuda {

// y[m, n] = x[m] . w[n] (+ bias[n]); y is T or f32.
template <typename T>
struct PlainEpilogue {
  static constexpr int R = 1;
  const T* bias;
  void* y;
  bool y_f32;
  int N;
  __device__ int64_t row(int n, int) const { return n; }
  __device__ void store(int n, int m, const float (&v)[R]) const {
    const float o = bias ? v[0] + to_f(bias[n]) : v[0];
    if (y_f32)
      static_cast<float*>(y)[int64_t(m) * N + n] = o;
    else
      static_cast<T*>(y)[int64_t(m) * N + n] = from_f<T>(o);
  }
};

// residual[m, n] += x[m] . w[n] rounded to T (the f32 residual stream's add, as linear into T then
// add_rms_norm computes it). One thread adds to each element, so the atomic add (a reduction the
// thread does not wait for) gives the sum a load + store would, without the load's latency at the
// kernel's tail.
template <typename T>
struct ResidualAddEpilogue {
  static constexpr int R = 1;
  float* residual;
  int N;
  __device__ int64_t row(int n, int) const { return n; }
  __device__ void store(int n, int m, const float (&v)[R]) const {
    atomicAdd(residual + int64_t(m) * N + n, to_f(from_f<T>(v[0])));
  }
};

// The same add at one token, handing the next projection its input (the norm handoff,
// LinearKernelOptions::norm_handoff_min_k / max_k): the thread that stores n loads residual[n] and norm_w[n] early
// (prefetch, after the kernel's PDL wait), adds the rounded dot product, stores the sum and
// xn[n] = sum * norm_w[n] rounded to T, the next norm's x before its 1 / rms.
template <typename T>
struct ResidualAddHandoffEpilogue {
  static constexpr int R = 1;
  static constexpr bool kPrefetch = true;
  float* residual;
  const T* norm_w;
  T* xn;
  __device__ int64_t row(int n, int) const { return n; }
  __device__ float2 prefetch(int n) const { return make_float2(residual[n], to_f(norm_w[n])); }
  __device__ void store(int n, int, const float (&v)[R], float2 pre) const {
    const float r = pre.x + to_f(from_f<T>(v[0]));
    residual[n] = r;
    xn[n] = from_f<T>(r * pre.y);
  }
};

// out[m, n] = act(x[m] . w[n]) * (x[m] . w[N + n]) for w = [gate; up].
template <typename T, GatedActivation A>
struct GatedEpilogue {
  static constexpr int R = 2;
  T* out;
  int N;
  bool round_inputs = false;
  __device__ int64_t row(int n, int r) const { return int64_t(r) * N + n; }
  __device__ void store(int n, int m, const float (&v)[R]) const {
    const float g = round_inputs ? to_f(from_f<T>(v[0])) : v[0], u = round_inputs ? to_f(from_f<T>(v[1])) : v[1];
    out[int64_t(m) * N + n] = from_f<T>(gated_act<A>(g, u));
  }
};

// Output n = (head h, pair i) of the fused qkv rows (heads in q, k, v order, D = 2 half wide): rows
// h D + i and h D + i + half (+ bias); q and k heads are rotated by token m's position and
// stored into q [M, hq D], k or v [M, hkv D]. With kHeadNorm (Qwen3) the q and k heads are first
// RMS-normed over their D outputs (times q_norm / k_norm), as split_qkv_rope does: the kernel
// sums the squares of a head's inputs() across the warps computing it (where normed()) and passes
// 1 / rms to store_pair.
template <typename T, bool kHeadNorm_ = false>
struct QkvRopeEpilogue {
  static constexpr int R = 2;
  static constexpr bool kHeadNorm = kHeadNorm_;
  const T* bias;
  const int32_t* positions;
  const float* inv_freq;
  T *q, *k, *v;
  int hq, hkv, half, long_from;
  bool round_inputs = false;
  const T *q_norm = nullptr, *k_norm = nullptr;
  float eps = 0.0f;
  __device__ int64_t row(int n, int r) const {
    const int h = n / half, i = n % half;
    return int64_t(h) * 2 * half + i + r * half;
  }
  // The pair's two outputs (+ bias, rounded to T where the unfused linear's output is).
  __device__ float2 inputs(int n, const float (&val)[R]) const {
    const int h = n / half, i = n % half, D = 2 * half;
    float a = val[0], b = val[1];
    if (bias) a += to_f(bias[h * D + i]), b += to_f(bias[h * D + i + half]);
    if (round_inputs) a = to_f(from_f<T>(a)), b = to_f(from_f<T>(b));
    return {a, b};
  }
  // Whether output n's head is RMS-normed (a q or k head, with kHeadNorm).
  __device__ bool normed(int n) const { return kHeadNorm && n / half < hq + hkv; }
  __device__ void store(int n, int m, const float (&val)[R]) const { store_pair(n, m, inputs(n, val), 1.0f); }
  // Stores the pair (a, b) of inputs(): v as is; q, k normed by inv_rms (where normed()) and rotated.
  __device__ void store_pair(int n, int m, float2 ab, float inv_rms) const {
    const int h = n / half, i = n % half, D = 2 * half;
    float a = ab.x, b = ab.y;
    T* dst;
    if (h >= hq + hkv) {
      dst = v + (int64_t(m) * hkv + h - hq - hkv) * D;
    } else {
      if (kHeadNorm) {
        const T* w = h < hq ? q_norm : k_norm;
        a *= inv_rms * to_f(w[i]), b *= inv_rms * to_f(w[i + half]);
      }
      const int pos = positions[m];
      float sn, cs;
      sincosf(float(pos) * inv_freq[(long_from > 0 && pos >= long_from ? half : 0) + i], &sn, &cs);
      const float ra = a * cs - b * sn, rb = b * cs + a * sn;
      a = ra, b = rb;
      dst = h < hq ? q + (int64_t(m) * hq + h) * D : k + (int64_t(m) * hkv + h - hq) * D;
    }
    dst[i] = from_f<T>(a);
    dst[i + half] = from_f<T>(b);
  }
};

// The row-parallel o_proj / down at one token summing its ranks' partials itself (ops/peer_sum.h,
// gemv_peer_sum). store(n) puts output n of this rank's partial, sendable and rounded to T, into y
// and into region `rank` of every peer's exchange buffer of this call. finish(), run by every
// thread of every block once the block's outputs are stored: the block's share of prefetching what
// the last block reads and of refilling the previous call's buffer with the sentinel, then the
// last block to arrive adds the ranks' rows (this rank's from y, read past L1: other blocks stored
// it) into the residual, stores the norm into out and closes the call. peer_sum_shape_fits(N,
// the block's threads).
template <typename T>
struct PeerSumEpilogue {
  static constexpr int R = 1;
  static constexpr bool kFinishes = true;
  T* y;
  PeerSum ps;
  float* residual;
  const T* norm_w;
  float eps;
  T* out;
  int N;
  __device__ int64_t row(int n, int) const { return n; }
  __device__ void store(int n, int, const float (&v)[R]) const {
    const T o = from_f<T>(sendable(to_f(from_f<T>(v[0]))));
    const uint32_t call = __ldcg(&ps.state->calls);
    y[n] = o;
    const size_t at = (call % 3) * ps.buffer_bytes + (size_t(ps.rank) * N + n) * sizeof(T);
#pragma unroll
    for (int p = 0; p < kPeerSumMaxRanks; ++p)  // constant indices (peer_buffer)
      if (p < ps.world && p != ps.rank) *reinterpret_cast<T*>(static_cast<char*>(ps.buffers[p]) + at) = o;
  }
  __device__ void finish() const {
    // The lines of norm_w and the residual the last block reads, into L2 while the others finish.
    const int w_lines = int((size_t(N) * sizeof(T) + 127) / 128), lines = w_lines + (N * 4 + 127) / 128;
    for (int l = int(blockIdx.x * blockDim.x + threadIdx.x); l < lines; l += int(gridDim.x * blockDim.x)) {
      const char* p = l < w_lines ? reinterpret_cast<const char*>(norm_w) + size_t(l) * 128
                                  : reinterpret_cast<const char*>(residual) + size_t(l - w_lines) * 128;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
    PeerSumState* st = ps.state;
    const uint32_t call = __ldcg(&st->calls), prev = (call + 2) % 3;
    fill_packs(reinterpret_cast<uint4*>(peer_buffer<T>(ps, ps.rank, prev)), __ldcg(&st->used[prev]) / 16, kSentinel<T>);
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      last = atomicAdd(&st->arrivals, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const T* mine = peer_buffer<T>(ps, ps.rank, call);
    const auto part = [&](int p, int e, float* f) {
      if (p != ps.rank) return spin_load8(mine + int64_t(p) * N + e, f);
#pragma unroll
      for (int i = 0; i < 8 / kVecElems<T>; ++i)
        unpack_vec<T>(__ldcg(reinterpret_cast<const uint4*>(y + e) + i), f + i * kVecElems<T>);
    };
    add_norm_row<T>(part, ps.world, residual, norm_w, eps, out, 0, N);
    if (threadIdx.x == 0) {
      st->arrivals = 0;
      st->used[call % 3] = uint32_t(ps.world * N * int(sizeof(T)));
      st->calls = call + 1;
    }
  }
};

// Whether an epilogue RMS-norms whole heads (QkvRopeEpilogue<T, true>).
template <typename E, typename = void>
struct HeadNormed : std::false_type {};
template <typename E>
struct HeadNormed<E, std::void_t<decltype(E::kHeadNorm)>> : std::bool_constant<E::kHeadNorm> {};
// Whether an epilogue has a finish() that every thread of the kernel runs after its stores.
template <typename E, typename = void>
struct Finishes : std::false_type {};
template <typename E>
struct Finishes<E, std::void_t<decltype(E::kFinishes)>> : std::bool_constant<E::kFinishes> {};
// Whether an epilogue loads a value for its output early (prefetch(n), passed to store).
template <typename E, typename = void>
struct Prefetches : std::false_type {};
template <typename E>
struct Prefetches<E, std::void_t<decltype(E::kPrefetch)>> : std::bool_constant<E::kPrefetch> {};

}  // namespace gs::cuda
