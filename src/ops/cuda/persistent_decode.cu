// The persistent decode kernel (persistent_decode.h): its phases, the grid barrier between them
// and the launch.
#include <algorithm>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/persistent_decode.h"
#include "ops/gated_activation.h"

namespace gs::cuda {

namespace {

// Warp kWarps is the producer: it streams every GEMV phase's weight rows of the CTA, in the order
// the phases run, into a ring of shared-memory stages by TMA bulk copies, and runs ahead of the
// consumer warps as far as the ring allows: through the grid barriers and the attention phase,
// since the weights depend on nothing the step computes. The kWarps consumer warps run the phases.
constexpr int kWarps = kPersistentConsumerWarps;
constexpr int kThreads = kWarps * 32;  // the consumers
constexpr int kMaxG = kPersistentMaxGroup;
constexpr int kStageBytes = kPersistentStageBytes;
// A split of a context holds at least this many keys (a split costs a merge through global memory;
// fewer keys a split put more CTAs on a short context, each with fewer dependent key loads).
constexpr int kKeysPerSplit = 32;

// The consumer warps' CTA barrier (named barrier 1): the producer warp never joins one.
__device__ __forceinline__ void cta_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory"); }

// block_sum over the consumer warps (every consumer thread gets the total).
__device__ float consumer_sum(float v) {
  __shared__ float part[kWarps];
  __shared__ float total;
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  v = warp_sum(v);
  if (lane == 0) part[warp] = v;
  cta_sync();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < kWarps; ++w) t += part[w];
    total = t;
  }
  cta_sync();
  return total;
}

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
    cta_sync();
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
    cta_sync();
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

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// The weight ring: `stages` shared-memory stages of kStageBytes, each with a full barrier (the
// producer's arrival with the bytes expected, completed by the bulk copy) and an empty barrier (an
// arrival from each consumer warp). Producer and consumers walk the stages in the same order, so
// each keeps its own slot and phase bit. The producer keeps at most `in_flight` stages issued and
// not landed: enough to stream at full bandwidth, and no deeper a queue in front of the loads
// and barrier atomics that the step's critical path waits for.
struct Ring {
  uint8_t* base;
  uint64_t* full;
  uint64_t* empty;
  int stages, in_flight, slot = 0;
  uint32_t phase = 0;
  int landed_slot = 0, issued = 0;  // the producer's: the oldest stage that may be in flight
  uint32_t landed_phase = 0;

  __device__ const uint8_t* data() const { return base + size_t(slot) * kStageBytes; }
  __device__ void advance() {
    if (++slot == stages) slot = 0, phase ^= 1u;
  }
  __device__ static void wait(uint64_t* bar, uint32_t parity) {
    uint32_t done;
    do {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done)
                   : "r"(smem_addr(bar)), "r"(parity)
                   : "memory");
    } while (!done);
  }
  // Producer (one thread): the next stage takes `bytes` (a multiple of 16) from src once the
  // consumers have released it and the stage in_flight before it has landed; the weights are read
  // once, so they are marked first to evict.
  __device__ void produce(const void* src, int bytes, uint64_t policy) {
    if (issued >= in_flight) {
      wait(full + landed_slot, landed_phase);
      if (++landed_slot == stages) landed_slot = 0, landed_phase ^= 1u;
    }
    ++issued;
    wait(empty + slot, phase ^ 1u);  // a fresh barrier counts as released
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(full + slot)), "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
            "r"(smem_addr(data())),
        "l"(src), "r"(bytes), "r"(smem_addr(full + slot)), "l"(policy)
        : "memory");
    advance();
  }
  // Consumers: wait until the stage has landed ...
  __device__ void acquire() const { wait(full + slot, phase); }
  // ... and, once each warp is done with it, hand it back.
  __device__ void release() {
    __syncwarp();
    if ((threadIdx.x & 31) == 0)
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(empty + slot)) : "memory");
    advance();
  }
};

// One ring stage: whole rows [row, row + rows) of a segment, or (rows == 1, a row longer than a
// stage) the bytes [off, off + bytes) of one row.
struct StageSpan {
  int row, rows, off, bytes;
};

// A GEMV phase's weights: output n < N reads rows n + r * rows_apart (r < R) of w [*, K]. A CTA
// computes outputs [n0, n1) of an even share; its rows of one r are contiguous bytes (a segment),
// streamed through the ring in stages of whole rows (as many as a stage holds), or a row longer
// than a stage in pieces, so that every row is summed by one warp (deterministic sums).
struct GemvWeights {
  const uint16_t* w;
  int N, K, R, rows_apart;
  __device__ int n0() const { return int(int64_t(blockIdx.x) * N / gridDim.x); }
  __device__ int n1() const { return int(int64_t(blockIdx.x + 1) * N / gridDim.x); }
  __device__ int row_bytes() const { return K * 2; }
  __device__ int rows_per_stage() const { return kStageBytes / row_bytes(); }  // 0: a row takes pieces
  __device__ int pieces() const { return (row_bytes() + kStageBytes - 1) / kStageBytes; }
  __device__ int stages() const {
    const int rows = n1() - n0(), rps = rows_per_stage();
    return rps > 0 ? (rows + rps - 1) / rps : rows * pieces();
  }
  __device__ StageSpan span(int i) const {
    const int rows = n1() - n0(), rps = rows_per_stage();
    if (rps > 0) return {i * rps, min(rps, rows - i * rps), 0, min(rps, rows - i * rps) * row_bytes()};
    const int off = i % pieces() * kStageBytes;
    return {i / pieces(), 1, off, min(kStageBytes, row_bytes() - off)};
  }
  // The producer's part: every segment into the ring.
  __device__ void stream(Ring& ring, uint64_t policy) const {
    const int S = stages();
    for (int r = 0; r < R; ++r) {
      const uint8_t* seg = reinterpret_cast<const uint8_t*>(w + (int64_t(n0()) + int64_t(r) * rows_apart) * K);
      for (int i = 0; i < S; ++i) {
        const StageSpan sp = span(i);
        ring.produce(seg + int64_t(sp.row) * row_bytes() + sp.off, sp.bytes, policy);
      }
    }
  }
};

// Loads a thread makes at once when it stages x: the loads follow a barrier, so they are the
// step's critical path, one L2 round trip for up to kStageLoads chunks a thread.
constexpr int kStageLoads = 4;

// xs[m] = rows [m] of x (bf16 [*, K]) for m < T, zero for T <= m < M.
template <int M>
__device__ void stage_rows(const uint16_t* x, int K, int T, uint16_t* xs) {
  const int C = K / 8, n = M * C;
  uint4* dst = reinterpret_cast<uint4*>(xs);
  const uint4* src = reinterpret_cast<const uint4*>(x);
  for (int i0 = int(threadIdx.x); i0 < n; i0 += kStageLoads * kThreads) {
    uint4 v[kStageLoads];
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u) {
      const int i = i0 + u * kThreads;
      v[u] = i < n && i / C < T ? __ldcg(src + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kStageLoads; ++u)
      if (i0 + u * kThreads < n) dst[i0 + u * kThreads] = v[u];
  }
  cta_sync();
}

// xs[m] = bf16(residual[m] * g) for m < T (zero for T <= m < M), and inv_rms[m] = 1 / rms of
// residual[m], in one pass: the GEMV's stores scale its sums by inv_rms (x . w = (r g) . w / rms).
template <int M>
__device__ void stage_normed(const float* residual, const uint16_t* g, int H, float eps, int T, uint16_t* xs,
                             float* inv_rms) {
  constexpr int U = kStageLoads / 2;  // two float4 a chunk
  __shared__ float part[kWarps][M];
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int C = H / 8, n = M * C;
  const float4* r4 = reinterpret_cast<const float4*>(residual);
  uint4* dst = reinterpret_cast<uint4*>(xs);
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int i0 = int(threadIdx.x); i0 < n; i0 += U * kThreads) {
    float4 a[U], b[U];
    uint4 gv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u * kThreads, m = i / C, c = i % C;
      const bool live = i < n && m < T;
      a[u] = live ? __ldcg(r4 + int64_t(m) * (H / 4) + 2 * c) : make_float4(0, 0, 0, 0);
      b[u] = live ? __ldcg(r4 + int64_t(m) * (H / 4) + 2 * c + 1) : make_float4(0, 0, 0, 0);
      gv[u] = i < n ? __ldg(reinterpret_cast<const uint4*>(g) + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u * kThreads, m = i / C;
      if (i >= n) break;
      float gf[8];
      unpack8(gv[u], gf);
      const float r[8] = {a[u].x, a[u].y, a[u].z, a[u].w, b[u].x, b[u].y, b[u].z, b[u].w};
      float f[8], sq = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = r[j] * gf[j], sq = fmaf(r[j], r[j], sq);
#pragma unroll
      for (int mm = 0; mm < M; ++mm)
        if (mm == m) ss[mm] += sq;
      dst[i] = pack_vec<uint16_t>(f);  // zero for the padding rows
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(ss[m]);
    if (lane == 0) part[warp][m] = v;
  }
  cta_sync();
  if (threadIdx.x < M) {
    float t = 0.0f;
    for (int w = 0; w < kWarps; ++w) t += part[w][threadIdx.x];
    inv_rms[threadIdx.x] = rsqrtf(t / float(H) + eps);
  }
  cta_sync();
}

// One GEMV phase: after stage() has filled xs (M rows of x), the CTA's outputs' dot products with
// them from the ring's stages, passed to store(n, v) (v[r][m]). Row j of a segment is warp j %
// kWarps's: its lanes take the row's 16-byte chunks in turn, sum across the row's pieces in
// registers, and lane 0 leaves the row's sums in acc (shared memory). Every warp waits for and
// releases every stage, its rows or not, so that none runs a lap ahead of the ring.
template <int M, int R, typename Stage, typename Store>
__device__ void gemv_phase(const GemvWeights& g, Ring& ring, const Stage& stage, const uint16_t* xs, float* acc,
                           const Store& store) {
  stage();
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), KV = g.K / 8;
  const int rows = g.n1() - g.n0(), S = g.stages();
  const uint4* xv = reinterpret_cast<const uint4*>(xs);
  float part[M][4];  // four sums a token: a chunk's products are no chain of 8 dependent FMAs
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < 4; ++j) part[m][j] = 0.0f;
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < S; ++i) {
      const StageSpan sp = g.span(i);
      ring.acquire();
      const uint4* wv = reinterpret_cast<const uint4*>(ring.data());
      for (int q = (warp - sp.row % kWarps + kWarps) % kWarps; q < sp.rows; q += kWarps) {
        const uint4* wr = wv + q * KV;
        const int kv0 = sp.off / 16, chunks = sp.bytes / 16 / sp.rows;
#pragma unroll 4
        for (int c = lane; c < chunks; c += 32) {
          float wf[8];
          unpack8(wr[c], wf);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            float xf[8];
            unpack8(xv[m * KV + kv0 + c], xf);
#pragma unroll
            for (int j = 0; j < 8; ++j) part[m][j % 4] = fmaf(wf[j], xf[j], part[m][j % 4]);
          }
        }
        if (sp.off + sp.bytes / sp.rows == g.row_bytes()) {  // the row's last chunks
#pragma unroll
          for (int m = 0; m < M; ++m) {
            const float v = warp_sum((part[m][0] + part[m][1]) + (part[m][2] + part[m][3]));
            if (lane == 0) acc[(r * rows + sp.row + q) * M + m] = v;
#pragma unroll
            for (int j = 0; j < 4; ++j) part[m][j] = 0.0f;
          }
        }
      }
      ring.release();
    }
  cta_sync();
  for (int i = int(threadIdx.x); i < rows; i += kThreads) {
    float v[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) v[r][m] = acc[(r * rows + i) * M + m];
    store(g.n0() + i, v);
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
    cta_sync();

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
    cta_sync();
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
      cta_sync();
      if (threadIdx.x == 0) {
        unsigned* c = p.counters + b * p.hkv + g;
        last = atomicAdd(c, 1u) == unsigned(ns - 1);
        if (last) atomicExch(c, 0u);
        __threadfence();
      }
      cta_sync();
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
    cta_sync();  // the shared buffers are the next task's
  }
}

// A layer's GEMV phases (A, C, D, E): the producer streams them and the consumers run them in this
// order.
struct LayerGemvs {
  GemvWeights qkv, o_proj, gate_up, down;
  __device__ LayerGemvs(const PersistentDecodeParams& p, const PersistentLayer& w)
      : qkv{w.qkv, (p.hq + 2 * p.hkv) * p.D, p.H, 1, 0},
        o_proj{w.o_proj, p.H, p.hq * p.D, 1, 0},
        gate_up{w.gate_up, p.I, p.H, 2, p.I},
        down{w.down, p.H, p.I, 1, 0} {}
};

// The producer warp's part of the step: every layer's GEMV phases in order.
__device__ void stream_weights(const PersistentDecodeParams& p, Ring& ring) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  for (int l = 0; l < p.num_layers; ++l) {
    const LayerGemvs g(p, p.layers[l]);
    g.qkv.stream(ring, policy);
    g.o_proj.stream(ring, policy);
    g.gate_up.stream(ring, policy);
    g.down.stream(ring, policy);
  }
}

template <int M, int D>
__global__ void __launch_bounds__(kPersistentThreads, 1) persistent_decode_kernel(const PersistentDecodeParams p) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  __shared__ float inv_rms[M];
  __shared__ uint64_t full[kPersistentMaxStages], empty[kPersistentMaxStages];
  const int H = p.H, I = p.I, T = p.T, QD = p.hq * p.D, W = QD + 2 * p.hkv * p.D;
  // Shared memory: the ring's stages, the scratch (x rows or the attention phase's), the GEMV sums.
  Ring ring{smem_raw, full, empty, p.ring_stages, p.stages_in_flight};
  uint8_t* scratch = smem_raw + size_t(p.ring_stages) * kStageBytes;
  uint16_t* xs = reinterpret_cast<uint16_t*>(scratch);
  float* acc = reinterpret_cast<float*>(scratch + p.scratch_bytes);
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.ring_stages; ++i) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(full + i)) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(empty + i)), "n"(kWarps) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();  // the last barrier of the whole CTA: the producer warp leaves below
  if (threadIdx.x >= kThreads) {
    if (threadIdx.x == kThreads) stream_weights(p, ring);
    return;
  }
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
  bar.sync();

  for (int l = 0; l < p.num_layers; ++l) {
    const PersistentLayer w = p.layers[l];
    const LayerGemvs g(p, w);
    auto stage_input = [&] { stage_normed<M>(p.residual, w.input_norm, H, p.eps, T, xs, inv_rms); };
    gemv_phase<M, 1>(g.qkv, ring, stage_input, xs, acc, QkvStore<M>{p.qkv, w.qkv_bias, inv_rms, W, T});  // A
    bar.sync();
    attention_phase<D>(p, w, reinterpret_cast<float*>(scratch));  // B
    bar.sync();
    auto stage_attn = [&] { stage_rows<M>(p.attn_out, QD, T, xs); };
    gemv_phase<M, 1>(g.o_proj, ring, stage_attn, xs, acc, ResidualAddStore<M>{p.residual, H, T});  // C
    bar.sync();
    auto stage_post = [&] { stage_normed<M>(p.residual, w.post_norm, H, p.eps, T, xs, inv_rms); };
    gemv_phase<M, 2>(g.gate_up, ring, stage_post, xs, acc, GatedStore<M>{p.act, inv_rms, I, T});  // D
    bar.sync();
    auto stage_act = [&] { stage_rows<M>(p.act, I, T, xs); };
    gemv_phase<M, 1>(g.down, ring, stage_act, xs, acc, ResidualAddStore<M>{p.residual, H, T});  // E
    bar.sync();
  }

  // The final norm; the launch's last barrier is behind every CTA, so the start of the next may
  // be recorded.
  for (int m = int(blockIdx.x); m < T; m += int(gridDim.x)) {
    const float* r = p.residual + int64_t(m) * H;
    float ss = 0.0f;
    for (int k = int(threadIdx.x); k < H; k += kThreads) ss += __ldcg(r + k) * __ldcg(r + k);
    const float inv = rsqrtf(consumer_sum(ss) / float(H) + p.eps);
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

PersistentSmem persistent_smem(int M, int H, int I, int hq, int hkv, int D, int grid, size_t limit) {
  const size_t x = size_t(M) * size_t(std::max({H, I, hq * D})) * 2;
  const size_t G = size_t(hq / hkv);
  const size_t attention = (G * D + 2 * kWarps * G + kWarps * G * D) * sizeof(float);
  PersistentSmem s;
  s.scratch_bytes = int((std::max(x, attention) + 15) / 16 * 16);
  auto rows = [&](int N) { return (N + grid - 1) / grid; };
  const int acc_floats = M * std::max({rows(hq * D + 2 * hkv * D), rows(H), 2 * rows(I)});  // the GEMV sums
  const size_t fixed = size_t(s.scratch_bytes) + size_t(acc_floats) * sizeof(float);
  // What the kernel's static shared memory leaves of the limit.
  constexpr size_t kStatic = 2048;
  const size_t room = limit > fixed + kStatic ? limit - fixed - kStatic : 0;
  s.stages = int(std::min<size_t>(kPersistentMaxStages, room / kStageBytes));
  s.bytes = fixed + size_t(s.stages) * kStageBytes;
  return s;
}

bool persistent_shapes_supported(int H, int I, int hq, int hkv, int D) {
  return (D == 64 || D == 128) && hkv > 0 && hq % hkv == 0 && hq / hkv <= kMaxG && hq / hkv + 2 <= kWarps &&
         H % 8 == 0 && I % 8 == 0 && H > 0 && I > 0;
}

cudaError_t persistent_decode_prepare(int M, int D, size_t smem, int* blocks_per_sm) {
  void* k = kernel_of(M, D);
  if (!k) return cudaErrorInvalidValue;
  if (const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem))) return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k, kPersistentThreads, smem);
}

cudaError_t persistent_decode(const PersistentDecodeParams& p, int M, int grid, size_t smem, cudaStream_t s) {
  void* k = kernel_of(M, p.D);
  if (!k || p.T < 1 || p.T > M) return cudaErrorInvalidValue;
  // A cooperative launch: the driver refuses it unless every CTA can be resident at once, which
  // the grid barrier needs (another context's kernels on the GPU could otherwise hold SMs).
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(kPersistentThreads);
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
