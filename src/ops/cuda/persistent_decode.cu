// The persistent decode kernel (persistent_decode.h): its phases, the grid barrier between them
// and the launch.
#include <algorithm>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/persistent_decode.h"
#include "ops/gated_activation.h"

namespace gs::cuda {

namespace {

constexpr int kThreads = kPersistentThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxG = kPersistentMaxGroup;
// A GEMV phase deals its outputs to the grid's warps round-robin; a warp streams an output's R
// weight rows with kUnroll 16-byte loads in flight per lane and row (8 at R = 1). Before each
// barrier every warp starts the L2 prefetch of the first kPrefetchBytes of its first output's
// rows in the next GEMV phase (~8 MB across the grid), so DRAM streams on through the hand-off.
constexpr int kPrefetchBytes = 4096;
// A split of a context holds at least this many keys (a split costs a merge through global memory).
constexpr int kKeysPerSplit = 256;

// The barrier between phases: every CTA arrives (release) and waits (acquire) until the whole
// grid has arrived, so whatever any CTA wrote before it is visible to every CTA after it. The
// arrival count only grows; `target` starts from where the previous launch left it (barrier[1],
// written once every CTA has read it: after the last barrier), so nothing is reset per launch.
struct GridBarrier {
  unsigned* count;
  unsigned target;            // thread 0's
  unsigned long long* trace;  // null, or the phase trace (persistent_trace_words)
  int num_barriers, k = 0;
  unsigned long long last = 0;  // CTA 0's: when it left the previous barrier

  __device__ void sync() {
    __syncthreads();
    if (threadIdx.x == 0) {
      if (trace) atomicMax(trace + k, globaltimer());
      target += gridDim.x;
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
      unsigned v;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
      } while (int(v - target) < 0);
      if (trace && blockIdx.x == 0) record();
      ++k;
    }
    __syncthreads();
  }
  // CTA 0, past barrier k: phase k's work (its start to the last CTA's arrival) and hand-off (that
  // arrival to now) added to the trace's sums; the arrival slot is reset for the next launch
  // (every CTA has arrived).
  __device__ void record() {
    const unsigned long long now = globaltimer(), arrived = trace[k];
    trace[k] = 0;
    trace[num_barriers + 2 * k] += arrived - last;
    trace[num_barriers + 2 * k + 1] += now - arrived;
    last = now;
  }
  __device__ static unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
};

__device__ __forceinline__ void prefetch_l2(const void* p, int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// A GEMV phase's weights: output n < N reads rows n + r * rows_apart (r < R) of w [*, K].
struct GemvWeights {
  const uint16_t* w;
  int N, K, R, rows_apart;
  // Before the barrier ahead of this phase: the L2 prefetch of this warp's first output's rows.
  __device__ void prefetch_start() const {
    const int n = int(blockIdx.x) * kWarps + int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
    if (n < N && lane < R) prefetch_l2(w + (int64_t(n) + int64_t(lane) * rows_apart) * K, min(2 * K, kPrefetchBytes));
  }
};

// xs[m] = rows [m] of x (bf16 [*, K]) for m < T, zero for T <= m < M.
template <int M>
__device__ void stage_rows(const uint16_t* x, int K, int T, uint16_t* xs) {
  const int C = K / 8;
  uint4* dst = reinterpret_cast<uint4*>(xs);
  const uint4* src = reinterpret_cast<const uint4*>(x);
  for (int i = int(threadIdx.x); i < M * C; i += kThreads)
    dst[i] = i / C < T ? __ldcg(src + i) : make_uint4(0, 0, 0, 0);
  __syncthreads();
}

// xs[m] = bf16(residual[m] * g) for m < T (zero for T <= m < M), and inv_rms[m] = 1 / rms of
// residual[m], in one pass: the GEMV's stores scale its sums by inv_rms (x . w = (r g) . w / rms).
template <int M>
__device__ void stage_normed(const float* residual, const uint16_t* g, int H, float eps, int T, uint16_t* xs,
                             float* inv_rms) {
  __shared__ float part[kWarps][M];
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int C = H / 8;
  const float4* r4 = reinterpret_cast<const float4*>(residual);
  uint4* dst = reinterpret_cast<uint4*>(xs);
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int i = int(threadIdx.x); i < M * C; i += kThreads) {
    const int m = i / C, c = i % C;
    if (m >= T) {
      dst[i] = make_uint4(0, 0, 0, 0);
      continue;
    }
    const float4 a = __ldcg(r4 + int64_t(m) * (H / 4) + 2 * c), b = __ldcg(r4 + int64_t(m) * (H / 4) + 2 * c + 1);
    float gf[8];
    unpack8(__ldg(reinterpret_cast<const uint4*>(g) + c), gf);
    const float r[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float f[8], sq = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = r[j] * gf[j], sq = fmaf(r[j], r[j], sq);
#pragma unroll
    for (int mm = 0; mm < M; ++mm)
      if (mm == m) ss[mm] += sq;
    dst[i] = pack_vec<uint16_t>(f);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(ss[m]);
    if (lane == 0) part[warp][m] = v;
  }
  __syncthreads();
  if (threadIdx.x < M) {
    float t = 0.0f;
    for (int w = 0; w < kWarps; ++w) t += part[w][threadIdx.x];
    inv_rms[threadIdx.x] = rsqrtf(t / float(H) + eps);
  }
  __syncthreads();
}

// acc[r][m] += w chunk of row r . x chunk of token m (x from shared memory).
template <int M, int R>
__device__ __forceinline__ void fma_chunk(const uint4 (&wv)[R], const uint4* xv, int KV, int kv, float (&acc)[R][M]) {
  float wf[R][8];
#pragma unroll
  for (int r = 0; r < R; ++r) unpack8(wv[r], wf[r]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[8];
    unpack8(xv[m * KV + kv], xf);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
  }
}

// One GEMV phase: after stage() has filled xs (M rows of x), output n's dot products with them,
// passed to store(n, v) (lane 0, v[r][m]).
template <int M, int R, typename Stage, typename Store>
__device__ void gemv_phase(const GemvWeights& g, const Stage& stage, const uint16_t* xs, const Store& store) {
  constexpr int U = R == 1 ? 8 : 4;
  stage();
  const int lane = int(threadIdx.x & 31), KV = g.K / 8;
  const int first = int(blockIdx.x) * kWarps + int(threadIdx.x >> 5), warps = int(gridDim.x) * kWarps;
  const uint4* xv = reinterpret_cast<const uint4*>(xs);
  for (int n = first; n < g.N; n += warps) {
    const uint4* wr[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
      wr[r] = reinterpret_cast<const uint4*>(g.w + (int64_t(n) + int64_t(r) * g.rows_apart) * g.K);
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
    int kv = lane;
    for (; kv + 32 * (U - 1) < KV; kv += 32 * U) {
      uint4 wv[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) wv[u][r] = __ldcs(wr[r] + kv + 32 * u);
#pragma unroll
      for (int u = 0; u < U; ++u) fma_chunk<M, R>(wv[u], xv, KV, kv + 32 * u, acc);
    }
    for (; kv < KV; kv += 32) {
      uint4 wv[R];
#pragma unroll
      for (int r = 0; r < R; ++r) wv[r] = __ldcs(wr[r] + kv);
      fma_chunk<M, R>(wv, xv, KV, kv, acc);
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) acc[r][m] = warp_sum(acc[r][m]);
    if (lane == 0) store(n, acc);
  }
}

// The GEMV phases' stores, for the rows m < T.
template <int M>
struct QkvStore {  // qkv[m, n] = bf16(v inv_rms[m] + bias[n])
  uint16_t* qkv;
  const uint16_t* bias;
  const float* inv_rms;
  int N, T;
  __device__ void operator()(int n, const float (&v)[1][M]) const {
    const float b = bias ? bf2f(__ldg(bias + n)) : 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (m < T) qkv[int64_t(m) * N + n] = f2bf(fmaf(v[0][m], inv_rms[m], b));
  }
};
template <int M>
struct ResidualAddStore {  // residual[m, n] += bf16(v): one thread adds to each element
  float* residual;
  int N, T;
  __device__ void operator()(int n, const float (&v)[1][M]) const {
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (m < T) atomicAdd(residual + int64_t(m) * N + n, bf2f(f2bf(v[0][m])));
  }
};
template <int M>
struct GatedStore {  // act[m, n] = bf16(silu(bf16(gate inv_rms[m])) * bf16(up inv_rms[m]))
  uint16_t* act;
  const float* inv_rms;
  int N, T;
  __device__ void operator()(int n, const float (&v)[2][M]) const {
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (m < T)
        act[int64_t(m) * N + n] =
            f2bf(gated_act<GatedActivation::Silu>(bf2f(f2bf(v[0][m] * inv_rms[m])), bf2f(f2bf(v[1][m] * inv_rms[m]))));
  }
};

// One head of the fused qkv row (bf16, the projection's rounding) for lane's pairs (i, i + D/2):
// RMS-normed over the head times `norm` when given (Qwen3), rotated at `pos` when `rotate`, rounded
// to bf16 and passed to put(i, a, b).
template <int D, typename Put>
__device__ __forceinline__ void head_pairs(const uint16_t* src, const uint16_t* norm, bool rotate, int pos,
                                           const PersistentDecodeParams& p, const Put& put) {
  constexpr int half = D / 2, P = half / 32;
  const int lane = int(threadIdx.x & 31);
  float a[P], b[P], ss = 0.0f;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int i = lane + 32 * j;
    a[j] = bf2f(__ldcg(src + i)), b[j] = bf2f(__ldcg(src + i + half));
    ss += a[j] * a[j] + b[j] * b[j];
  }
  const float inv_rms = norm ? rsqrtf(warp_sum(ss) / float(D) + p.eps) : 1.0f;
  const int table = p.long_from > 0 && pos >= p.long_from ? half : 0;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int i = lane + 32 * j;
    float x = a[j], y = b[j];
    if (norm) x *= inv_rms * bf2f(__ldg(norm + i)), y *= inv_rms * bf2f(__ldg(norm + i + half));
    if (rotate) {
      float sn, cs;
      sincosf(float(pos) * __ldg(p.inv_freq + table + i), &sn, &cs);
      const float rx = x * cs - y * sn, ry = y * cs + x * sn;
      x = rx, y = ry;
    }
    put(i, f2bf(x), f2bf(y));
  }
}

// E consecutive bf16 (E = 2 or 4) to f32, through L2.
template <int E>
__device__ __forceinline__ void load_row(const uint16_t* p, float (&f)[E]) {
  if constexpr (E == 4) {
    const uint2 v = __ldcg(reinterpret_cast<const uint2*>(p));
    f[0] = __uint_as_float(v.x << 16), f[1] = __uint_as_float(v.x & 0xffff0000u);
    f[2] = __uint_as_float(v.y << 16), f[3] = __uint_as_float(v.y & 0xffff0000u);
  } else {
    const unsigned v = __ldcg(reinterpret_cast<const unsigned*>(p));
    f[0] = __uint_as_float(v << 16), f[1] = __uint_as_float(v & 0xffff0000u);
  }
}

// Online softmax state of a warp: per head of the group, the running max, sum and the lane's E
// output dims.
template <int E>
struct SoftmaxState {
  float m[kMaxG], l[kMaxG], acc[kMaxG][E];
  __device__ void init() {
#pragma unroll
    for (int h = 0; h < kMaxG; ++h) {
      m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[h][e] = 0.0f;
    }
  }
  __device__ __forceinline__ void add(const float (&q)[kMaxG][E], const float (&k)[E], const float (&v)[E], int G,
                                      float scale) {
#pragma unroll
    for (int h = 0; h < kMaxG; ++h) {
      if (h >= G) break;
      float d = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) d = fmaf(q[h][e], k[e], d);
      d = warp_sum(d) * scale;
      const float mn = fmaxf(m[h], d), c = __expf(m[h] - mn), pr = __expf(d - mn);
      l[h] = l[h] * c + pr;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[h][e] = fmaf(acc[h][e], c, pr * v[e]);
      m[h] = mn;
    }
  }
};

// Phase B: attention for every (request b, kv head g, split s) task, a CTA each (see the header).
// sm: G D floats of q, then per warp and head its max and sum, then its G D partial outputs.
template <int D>
__device__ void attention_phase(const PersistentDecodeParams& p, const PersistentLayer& w, float* sm) {
  constexpr int E = D / 32;
  __shared__ int last;
  const int G = p.hq / p.hkv, warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int S = max(1, min(kPersistentMaxSplits, int(gridDim.x) / (p.T * p.hkv)));
  const int W = (p.hq + 2 * p.hkv) * D;
  float* qs = sm;
  float* pm = qs + G * D;
  float* pl = pm + kWarps * G;
  float* pacc = pl + kWarps * G;
  for (int t = int(blockIdx.x); t < p.T * p.hkv * S; t += int(gridDim.x)) {
    const int b = t / (p.hkv * S), g = t / S % p.hkv, s = t % S;
    const int L = __ldg(p.seq_lens + b);
    const int want = L <= 0 ? 1 : min(S, (L + kKeysPerSplit - 1) / kKeysPerSplit);
    const int per = L <= 0 ? 0 : (L + want - 1) / want;
    const int ns = L <= 0 ? 1 : (L + per - 1) / per;  // every split non-empty; the last holds key L - 1
    if (s >= ns) continue;
    uint16_t* out = p.attn_out + int64_t(b) * p.hq * D + int64_t(g) * G * D;
    if (L <= 0) {  // a padding row
      for (int i = int(threadIdx.x); i < G * D; i += kThreads) out[i] = 0;
      continue;
    }
    const uint16_t* row = p.qkv + int64_t(b) * W;
    const int pos = __ldg(p.positions + b), slot = __ldg(p.slot_mapping + b);
    const int k0 = s * per, k1 = min(L, k0 + per);
    const int32_t* bt = p.block_table + int64_t(b) * p.max_blocks_per_req;
    auto key_at = [&](int j) {
      const int blk = __ldg(bt + j / p.block_size);
      return ((int64_t(blk) * p.block_size + j % p.block_size) * p.hkv + g) * D + lane * E;
    };
    for (int j = k0 + warp; j < k1 && j < k0 + warp + 2 * kWarps; j += kWarps) {  // the first keys, into L2
      const int64_t o = key_at(j);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(w.k_cache + o));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(w.v_cache + o));
    }
    if (warp < G) {
      float* q = qs + warp * D;
      head_pairs<D>(row + (g * G + warp) * D, w.q_norm, true, pos, p,
                    [&](int i, uint16_t x, uint16_t y) { q[i] = bf2f(x), q[i + D / 2] = bf2f(y); });
    } else if (s == ns - 1 && warp <= G + 1 && slot >= 0 && slot < p.num_slots) {  // the new k (G) or v (G + 1)
      const bool is_k = warp == G;
      uint16_t* dst = (is_k ? w.k_cache : w.v_cache) + (int64_t(slot) * p.hkv + g) * D;
      head_pairs<D>(row + (p.hq + (is_k ? 0 : p.hkv) + g) * D, is_k ? w.k_norm : nullptr, is_k, pos, p,
                    [&](int i, uint16_t x, uint16_t y) { dst[i] = x, dst[i + D / 2] = y; });
    }
    __syncthreads();

    float q[kMaxG][E];
#pragma unroll
    for (int h = 0; h < kMaxG; ++h)
#pragma unroll
      for (int e = 0; e < E; ++e) q[h][e] = h < G ? qs[h * D + lane * E + e] : 0.0f;
    SoftmaxState<E> st;
    st.init();
    for (int j = k0 + warp; j < k1; j += 2 * kWarps) {  // two keys' loads in flight
      const bool two = j + kWarps < k1;
      float k_a[E], v_a[E], k_b[E], v_b[E];
      const int64_t oa = key_at(j), ob = two ? key_at(j + kWarps) : oa;
      load_row<E>(w.k_cache + oa, k_a), load_row<E>(w.v_cache + oa, v_a);
      load_row<E>(w.k_cache + ob, k_b), load_row<E>(w.v_cache + ob, v_b);
      st.add(q, k_a, v_a, G, p.scale);
      if (two) st.add(q, k_b, v_b, G, p.scale);
    }
#pragma unroll
    for (int h = 0; h < kMaxG; ++h) {
      if (h >= G) break;
      if (lane == 0) pm[warp * G + h] = st.m[h], pl[warp * G + h] = st.l[h];
#pragma unroll
      for (int e = 0; e < E; ++e) pacc[(warp * G + h) * D + lane * E + e] = st.acc[h][e];
    }
    __syncthreads();
    // The CTA's warps merged: the whole output where one split covers the context, else this
    // split's partial (unnormalised output, max, sum).
    for (int i = int(threadIdx.x); i < G * D; i += kThreads) {
      const int h = i / D, d = i % D;
      float mx = -INFINITY;
      for (int v = 0; v < kWarps; ++v) mx = fmaxf(mx, pm[v * G + h]);
      float l = 0.0f, a = 0.0f;
      for (int v = 0; v < kWarps; ++v) {
        const float c = __expf(pm[v * G + h] - mx);
        l = fmaf(pl[v * G + h], c, l), a = fmaf(pacc[(v * G + h) * D + d], c, a);
      }
      if (ns == 1) {
        out[i] = f2bf(a / l);
      } else {
        float* part = p.partials + ((int64_t(b) * p.hq + g * G + h) * kPersistentMaxSplits + s) * (D + 2);
        part[d] = a;
        if (d == 0) part[D] = mx, part[D + 1] = l;
      }
    }
    if (ns > 1) {  // the last split of the pair to finish merges them
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned* c = p.counters + b * p.hkv + g;
        last = atomicAdd(c, 1u) == unsigned(ns - 1);
        if (last) atomicExch(c, 0u);
        __threadfence();
      }
      __syncthreads();
      if (last) {
        for (int i = int(threadIdx.x); i < G * D; i += kThreads) {
          const int h = i / D, d = i % D;
          const float* part = p.partials + (int64_t(b) * p.hq + g * G + h) * kPersistentMaxSplits * (D + 2);
          float mx = -INFINITY;
          for (int v = 0; v < ns; ++v) mx = fmaxf(mx, __ldcg(part + v * (D + 2) + D));
          float l = 0.0f, a = 0.0f;
          for (int v = 0; v < ns; ++v) {
            const float c = __expf(__ldcg(part + v * (D + 2) + D) - mx);
            l = fmaf(__ldcg(part + v * (D + 2) + D + 1), c, l), a = fmaf(__ldcg(part + v * (D + 2) + d), c, a);
          }
          out[i] = f2bf(a / l);
        }
      }
    }
    __syncthreads();  // the shared buffers are the next task's
  }
}

template <int M, int D>
__global__ void __launch_bounds__(kThreads, 1) persistent_decode_kernel(const PersistentDecodeParams p) {
  extern __shared__ uint4 smem_raw[];
  __shared__ float inv_rms[M];
  const int H = p.H, I = p.I, T = p.T, QD = p.hq * p.D, W = QD + 2 * p.hkv * p.D;
  uint16_t* xs = reinterpret_cast<uint16_t*>(smem_raw);
  GridBarrier bar{p.barrier, 0, p.trace, 1 + 5 * p.num_layers};
  if (threadIdx.x == 0) bar.target = *reinterpret_cast<volatile unsigned*>(p.barrier + 1), bar.last = bar.globaltimer();

  // The embedding rows into the f32 residual stream.
  for (int i = int(blockIdx.x * kThreads + threadIdx.x); i < T * (H / 8); i += int(gridDim.x) * kThreads) {
    const int m = i / (H / 8), c = i % (H / 8);
    float f[8];
    unpack8(__ldg(reinterpret_cast<const uint4*>(p.embed + int64_t(__ldg(p.ids + m)) * H) + c), f);
    float4* r = reinterpret_cast<float4*>(p.residual + int64_t(m) * H) + 2 * c;
    r[0] = make_float4(f[0], f[1], f[2], f[3]), r[1] = make_float4(f[4], f[5], f[6], f[7]);
  }
  GemvWeights{p.layers[0].qkv, W, H, 1, 0}.prefetch_start();
  bar.sync();

  for (int l = 0; l < p.num_layers; ++l) {
    const PersistentLayer w = p.layers[l];
    const GemvWeights qkv{w.qkv, W, H, 1, 0}, o_proj{w.o_proj, H, QD, 1, 0}, gate_up{w.gate_up, I, H, 2, I},
        down{w.down, H, I, 1, 0};
    auto stage_input = [&] { stage_normed<M>(p.residual, w.input_norm, H, p.eps, T, xs, inv_rms); };
    gemv_phase<M, 1>(qkv, stage_input, xs, QkvStore<M>{p.qkv, w.qkv_bias, inv_rms, W, T});  // A
    o_proj.prefetch_start();
    bar.sync();
    gate_up.prefetch_start();  // B: most CTAs have no attention task, DRAM streams on
    attention_phase<D>(p, w, reinterpret_cast<float*>(smem_raw));
    bar.sync();
    auto stage_attn = [&] { stage_rows<M>(p.attn_out, QD, T, xs); };
    gemv_phase<M, 1>(o_proj, stage_attn, xs, ResidualAddStore<M>{p.residual, H, T});  // C
    gate_up.prefetch_start();  // in L2 from B's prefetch unless evicted since
    bar.sync();
    auto stage_post = [&] { stage_normed<M>(p.residual, w.post_norm, H, p.eps, T, xs, inv_rms); };
    gemv_phase<M, 2>(gate_up, stage_post, xs, GatedStore<M>{p.act, inv_rms, I, T});  // D
    down.prefetch_start();
    bar.sync();
    auto stage_act = [&] { stage_rows<M>(p.act, I, T, xs); };
    gemv_phase<M, 1>(down, stage_act, xs, ResidualAddStore<M>{p.residual, H, T});  // E
    if (l + 1 < p.num_layers) GemvWeights{p.layers[l + 1].qkv, W, H, 1, 0}.prefetch_start();
    bar.sync();
  }

  // The final norm; the launch's last barrier is behind every CTA, so the start of the next may
  // be recorded.
  for (int m = int(blockIdx.x); m < T; m += int(gridDim.x)) {
    const float* r = p.residual + int64_t(m) * H;
    float ss = 0.0f;
    for (int k = int(threadIdx.x); k < H; k += kThreads) ss += __ldcg(r + k) * __ldcg(r + k);
    const float inv = rsqrtf(block_sum(ss) / float(H) + p.eps);
    for (int k = int(threadIdx.x); k < H; k += kThreads)
      p.hidden[int64_t(m) * H + k] = f2bf(__ldcg(r + k) * inv * bf2f(__ldg(p.final_norm + k)));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    p.barrier[1] = bar.target;
    if (p.trace) ++p.trace[3 * bar.num_barriers];
  }
}

template <int D>
void* kernel_of(int M) {
  switch (M) {
    case 1: return reinterpret_cast<void*>(persistent_decode_kernel<1, D>);
    case 2: return reinterpret_cast<void*>(persistent_decode_kernel<2, D>);
    case 4: return reinterpret_cast<void*>(persistent_decode_kernel<4, D>);
    default: return nullptr;
  }
}

void* kernel_of(int M, int D) { return D == 64 ? kernel_of<64>(M) : D == 128 ? kernel_of<128>(M) : nullptr; }

}  // namespace

size_t persistent_partials_floats(int hq, int D) {
  return size_t(kPersistentMaxTokens) * size_t(hq) * kPersistentMaxSplits * size_t(D + 2);
}

size_t persistent_smem_bytes(int M, int H, int I, int hq, int hkv, int D) {
  const size_t x = size_t(M) * size_t(std::max({H, I, hq * D})) * 2;
  const size_t G = size_t(hq / hkv);
  const size_t attention = (G * D + 2 * kWarps * G + kWarps * G * D) * sizeof(float);
  return std::max(x, attention);
}

bool persistent_shapes_supported(int H, int I, int hq, int hkv, int D) {
  return (D == 64 || D == 128) && hkv > 0 && hq % hkv == 0 && hq / hkv <= kMaxG && hq / hkv + 2 <= kWarps &&
         H % 8 == 0 && I % 8 == 0 && H > 0 && I > 0;
}

cudaError_t persistent_decode_prepare(int M, int D, size_t smem, int* blocks_per_sm) {
  void* k = kernel_of(M, D);
  if (!k) return cudaErrorInvalidValue;
  if (const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem))) return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k, kThreads, smem);
}

cudaError_t persistent_decode(const PersistentDecodeParams& p, int M, int grid, size_t smem, cudaStream_t s) {
  void* k = kernel_of(M, p.D);
  if (!k || p.T < 1 || p.T > M) return cudaErrorInvalidValue;
  // A cooperative launch: the driver refuses it unless every CTA can be resident at once, which
  // the grid barrier needs (another context's kernels on the GPU could otherwise hold SMs).
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  void* args[] = {const_cast<PersistentDecodeParams*>(&p)};
  return cudaLaunchKernelExC(&cfg, k, args);
}

}  // namespace gs::cuda
