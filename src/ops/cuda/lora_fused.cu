// The LoRA expand fused into the op that consumes the projection's output (from 2 tokens on; one
// kernel instead of two, y read once):
//   split_qkv_rope (no q/k norm): a block per (token, 16 heads);
//   the residual add + RMSNorm after o and down: a block per token;
//   the gated activation: a block per (token, 256 columns), below 64 tokens.
// Each adds the delta rounded to T, as lora_expand stores it, before the op's math.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "ops/cuda/lora_common.cuh"

namespace gs::cuda {

namespace {

using namespace lora;

constexpr int kNormThreads = 256;
constexpr int kSlices = 4;  // warps of a per-token gated block: gate's even / odd rank rows, then up's
constexpr int kManyTokens = 64;

// One block per token: each thread C chunks of 8 columns of the row (x += delta rounded to T,
// residual += x, then the row's RMSNorm), x read before the block's reduction, out written after
// it (out may alias x).
template <typename T, typename Ty, typename Rs, int C>
__global__ void __launch_bounds__(kNormThreads)
    lora_expand_add_rms_norm_kernel(LoraTmp tmp, const T* __restrict__ bt, const int32_t* __restrict__ slots,
                                    Rs* residual, const Ty* x, int64_t ld, const T* w, float eps, T* out, int H, int R,
                                    int S) {
  const int64_t t = blockIdx.x;
  const int slot = slots[t];
  const bool lora = slot >= 0 && slot < S;
  ChunkRows<T, kHeldRows<T> / C> d[C];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * kNormThreads) * 8;
    d[c] = {lora && e < H ? bt + int64_t(slot) * R * H + e : nullptr, H, 0, 1, R};
    d[c].prefetch();
  }
  pdl_wait();
  pdl_trigger();
  float v[C][8] = {};
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int e = (int(threadIdx.x) + c * kNormThreads) * 8;
    if (e >= H) break;
    float acc[8] = {}, r[8];
    load8(x + t * ld + e, v[c]);
    load8(residual + t * H + e, r);
    d[c].accumulate(tmp_row(tmp, t, slot, lora), acc);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float y = to_f(from_f<T>(v[c][i] + acc[i]));
      r[i] = v[c][i] = to_f(from_f<Rs>(r[i] + y));
      ss += v[c][i] * v[c][i];
    }
    store8(residual + t * H + e, r);
  }
  rms_norm_store(v, ss, H, eps, kNormThreads, out + t * H, [w](int, int e, float* wf) { load8(w + e, wf); });
}

// A block per (token, 32 chunks of 8 columns): warps 0, 1 take the gate chunk's even and odd rank
// rows, warps 2, 3 the up chunk's; warp 0 sums the four through shared memory, adds the gate and up
// values (rounded to T, as lora_expand stores them) and applies the activation.
template <GatedActivation A, typename T, typename Ty>
__global__ void __launch_bounds__(kSlices * 32)
    lora_expand_gated_kernel(LoraTmp tmp, const T* __restrict__ bt, const int32_t* __restrict__ slots,
                             const Ty* gate_up, int64_t ld, T* out, int I, int R, int S) {
  static_assert(kSlices == 4, "two warps per target");
  __shared__ float part[kSlices - 1][32][8];
  const int64_t t = blockIdx.x;
  const int slot = slots[t];
  const int slice = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int e = (int(blockIdx.y) * 32 + lane) * 8, target = slice >> 1, rows = R / 2;
  const bool on = e < I, lora = slot >= 0 && slot < S;
  ChunkRows<T, kHeldRows<T> / 2> d{
      on && lora ? bt + (int64_t(slot) * R + target * rows) * 2 * I + target * I + e : nullptr, 2 * int64_t(I),
      slice & 1, 2, rows};
  d.prefetch();
  pdl_wait();
  pdl_trigger();
  float g[8] = {}, u[8] = {}, acc[8] = {};
  if (slice == 0 && on) {  // loaded now, overlapping the tmp loads below
    load8(gate_up + t * ld + e, g);
    load8(gate_up + t * ld + I + e, u);
  }
  if (lora) d.accumulate(tmp_row(tmp, t, slot, lora) + target * rows, acc);
  if (slice > 0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) part[slice - 1][lane][i] = acc[i];
  }
  __syncthreads();
  if (slice > 0 || !on) return;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float gi = to_f(from_f<T>(g[i] + (acc[i] + part[0][lane][i])));
    const float ui = to_f(from_f<T>(u[i] + (part[1][lane][i] + part[2][lane][i])));
    g[i] = gated_act<A>(gi, ui);
  }
  store8(out + t * I + e, g);
}

// A block per token, kTph threads per head of its q | k | v row (D = 16 kTph): thread (h, c)
// holds the 8 rotary pairs (c + j, c + j + D/2) of head h, adds the delta of their two column
// chunks (rounded to T, as lora_expand stores them), then rotates q and k at the token's position
// with cos / sin tabulated once per token in shared memory (split_qkv_rope's angles: fp32
// position * inv_freq, accurate sincosf) and copies v. No q/k norm.
template <typename T, typename Ty, int kTph>
__global__ void lora_expand_split_qkv_rope_kernel(LoraTmp tmp, const T* __restrict__ bt,
                                                  const int32_t* __restrict__ slots, LoraColumnParts parts, int R,
                                                  int S, const Ty* qkv, int64_t ld, const int32_t* positions,
                                                  const float* inv_freq, T* q, T* k, T* v, int hq, int hkv,
                                                  int long_from) {
  constexpr int half = kTph * 8, D = 2 * half;
  __shared__ float2 cs[half];
  const int64_t t = blockIdx.x;
  const int heads = hq + 2 * hkv, N = heads * D, c = (int(threadIdx.x) % kTph) * 8;
  const int h = int(blockIdx.y * blockDim.x + threadIdx.x) / kTph;  // past the row's heads: the table only
  const int col = h * D + c, target = int(col >= parts.begin1) + int(col >= parts.begin2);
  const int slot = slots[t];
  const bool lora = slot >= 0 && slot < S && h < heads;
  const T* b = lora ? bt + (int64_t(slot) * R + target * parts.rows) * N + col : nullptr;
  ChunkRows<T, kHeldRows<T>> da{b, N, 0, 1, parts.rows}, db{b ? b + half : nullptr, N, 0, 1, parts.rows};
  da.prefetch();
  db.prefetch();
  pdl_wait();
  pdl_trigger();
  const int pos = positions[t];
  const float* table = inv_freq + (long_from > 0 && pos >= long_from ? half : 0);
  for (int i = int(threadIdx.x); i < half; i += int(blockDim.x)) sincosf(float(pos) * table[i], &cs[i].y, &cs[i].x);
  __syncthreads();
  if (h >= heads) return;
  float a[8], bv[8], acc_a[8] = {}, acc_b[8] = {};
  load8(qkv + t * ld + col, a);
  load8(qkv + t * ld + col + half, bv);
  if (lora) {
    const float* tr = tmp_row(tmp, t, slot, lora) + target * parts.rows;
    da.accumulate(tr, acc_a);
    db.accumulate(tr, acc_b);
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = to_f(from_f<T>(a[j] + acc_a[j])), bv[j] = to_f(from_f<T>(bv[j] + acc_b[j]));
  if (h >= hq + hkv) {
    T* dst = v + (t * hkv + (h - hq - hkv)) * D;
    store8(dst + c, a);
    store8(dst + half + c, bv);
    return;
  }
  store_rotated8(h < hq ? q + (t * hq + h) * D : k + (t * hkv + (h - hq)) * D, c, half, a, bv, cs);
}

// Heads of a token a block of the fused qkv expand takes (3 blocks a token of llama3.2-1b).
constexpr int kQkvHeadsPerBlock = 16;

}  // namespace

template <typename T, typename Ty, typename Rs>
bool lora_expand_add_rms_norm(LoraTmp tmp, const T* bt, const int32_t* slots, Rs* residual, const Ty* x, int64_t ld,
                              const T* w, float eps, T* out, int T_, int H, int R, int S, cudaStream_t s,
                              cudaError_t* err) {
  const int chunks = H / 8;
  if (H % 8 != 0 || ld % 8 != 0 || chunks > 4 * kNormThreads || !vec_aligned(bt, x, w, out, residual)) return false;
  if (T_ == 0) return true;
  auto go = [&](auto kernel) {
    *err = launch_pdl(kernel, unsigned(T_), kNormThreads, 0, s, tmp, bt, slots, residual, x, ld, w, eps, out, H, R, S);
    return true;
  };
  if (chunks <= kNormThreads) return go(lora_expand_add_rms_norm_kernel<T, Ty, Rs, 1>);
  if (chunks <= 2 * kNormThreads) return go(lora_expand_add_rms_norm_kernel<T, Ty, Rs, 2>);
  return go(lora_expand_add_rms_norm_kernel<T, Ty, Rs, 4>);
}

template <typename T, typename Ty>
bool lora_expand_gated_activation(GatedActivation act, LoraTmp tmp, const T* bt, const int32_t* slots,
                                  const Ty* gate_up, int64_t ld, T* out, int T_, int I, int R, int S, cudaStream_t s,
                                  cudaError_t* err) {
  if (I % 8 != 0 || ld % 8 != 0 || R % 2 != 0 || T_ >= kManyTokens || !vec_aligned(bt, gate_up, out)) return false;
  if (T_ == 0) return true;
  auto go = [&](auto a) {
    constexpr GatedActivation A = decltype(a)::value;
    return launch_pdl(lora_expand_gated_kernel<A, T, Ty>, dim3(unsigned(T_), ceil_div(I / 8, 32)), dim3(kSlices * 32),
                      0, s, tmp, bt, slots, gate_up, ld, out, I, R, S);
  };
  using Act = GatedActivation;
  *err = act == Act::GeluTanh ? go(std::integral_constant<Act, Act::GeluTanh>{})
                              : go(std::integral_constant<Act, Act::Silu>{});
  return true;
}

template <typename T, typename Ty>
bool lora_expand_split_qkv_rope(LoraTmp tmp, const T* bt, const int32_t* slots, LoraColumnParts parts, int R, int S,
                                const Ty* qkv, int64_t ld, const int32_t* positions, const float* inv_freq, T* q, T* k,
                                T* v, int T_, int hq, int hkv, int D, int long_from, cudaStream_t s, cudaError_t* err) {
  const int heads = hq + 2 * hkv, hb = std::min(heads, kQkvHeadsPerBlock), threads = hb * (D / 16);
  const bool heads_split = parts.begin1 == hq * D && parts.begin2 == (hq + hkv) * D && parts.rows * 3 == R;
  if (D % 16 != 0 || ld % 8 != 0 || threads > 1024 || !heads_split || !vec_aligned(bt, qkv, q, k, v)) return false;
  if (T_ == 0) return true;
  auto go = [&](auto kernel) {
    *err = launch_pdl(kernel, dim3(unsigned(T_), ceil_div(heads, hb)), unsigned(threads), 0, s, tmp, bt, slots, parts,
                      R, S, qkv, ld, positions, inv_freq, q, k, v, hq, hkv, long_from);
    return true;
  };
  switch (D / 16) {
    case 2: return go(lora_expand_split_qkv_rope_kernel<T, Ty, 2>);
    case 4: return go(lora_expand_split_qkv_rope_kernel<T, Ty, 4>);
    case 8: return go(lora_expand_split_qkv_rope_kernel<T, Ty, 8>);
    case 16: return go(lora_expand_split_qkv_rope_kernel<T, Ty, 16>);
    default: return false;
  }
}

// y in T (after lora_shrink) or f32 (the stacked GEMM's output); f32 with f32.
#define GS_INSTANTIATE_LORA_FUSED(T, Ty, Rs)                                                                         \
  template bool lora_expand_gated_activation<T, Ty>(GatedActivation, LoraTmp, const T*, const int32_t*, const Ty*,   \
                                                    int64_t, T*, int, int, int, int, cudaStream_t, cudaError_t*);    \
  template bool lora_expand_split_qkv_rope<T, Ty>(LoraTmp, const T*, const int32_t*, LoraColumnParts, int, int,      \
                                                  const Ty*, int64_t, const int32_t*, const float*, T*, T*, T*, int, \
                                                  int, int, int, int, cudaStream_t, cudaError_t*);                   \
  template bool lora_expand_add_rms_norm<T, Ty, Rs>(LoraTmp, const T*, const int32_t*, Rs*, const Ty*, int64_t,      \
                                                    const T*, float, T*, int, int, int, int, cudaStream_t,           \
                                                    cudaError_t*);
GS_INSTANTIATE_LORA_FUSED(bf16_t, bf16_t, bf16_t)
GS_INSTANTIATE_LORA_FUSED(bf16_t, float, bf16_t)
GS_INSTANTIATE_LORA_FUSED(float, float, float)
#undef GS_INSTANTIATE_LORA_FUSED
#define GS_INSTANTIATE_LORA_NORM_F32_RESIDUAL(Ty)                                                                      \
  template bool lora_expand_add_rms_norm<bf16_t, Ty, float>(LoraTmp, const bf16_t*, const int32_t*, float*, const Ty*, \
                                                            int64_t, const bf16_t*, float, bf16_t*, int, int, int,     \
                                                            int, cudaStream_t, cudaError_t*);
GS_INSTANTIATE_LORA_NORM_F32_RESIDUAL(bf16_t)
GS_INSTANTIATE_LORA_NORM_F32_RESIDUAL(float)
#undef GS_INSTANTIATE_LORA_NORM_F32_RESIDUAL

}  // namespace gs::cuda
