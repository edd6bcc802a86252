// MLA's attend step on tensor cores (mla_kernels.h, launch_mla_attend_mma): the absorbed form's
// multi-query attention, every head of a token reading the same cached latent rows (keys: all
// L + R columns; values: the first L), for launches of many tokens (prefill, chunked prefill,
// large decode batches), whose work the CUDA-core attend of mla_kernels.cu does as per-thread dot
// products far below the tensor cores' rate (docs/PERF.md, MLA).
//
// A CTA of 8 warps owns 64 query rows: TPT = 64 / HG consecutive tokens of one request times HG =
// min(heads, 64) heads (row = token * HG + head; grid y over the head groups), tiles mapped to
// CTAs as the tensor-core paged kernel does (locate_tile). Q (f32 q_latent) is rounded to bf16
// into shared memory once; cached rows stream through two shared-memory stages of 32 keys, the
// next tile's loads in registers while the current one computes (an e4m3 cache widens to bf16
// exactly on the way in; its scale folds into the softmax scale and the output's normalisation).
//
// Warps pair up on 16 rows: warp w takes rows 16 (w % 4) .. + 16, keys 16 (w / 4) .. + 16 of a tile
// for S = Q K^T over all L + R columns (mma.sync m16n8k16, Q's fragments reread from shared
// memory, as 16 x 576 would not fit registers), and output columns L/2 (w / 4) .. + L/2 for
// O += P V. The pair agrees on each row's running max through shared memory, so both rescale
// alike; each then hands its probabilities (already in the A-fragment layout) to the other, and
// sums its own; the two sums meet at the end. Output: normalised rows of o_latent (f32), zeros
// for padded tokens, as the CUDA-core attend with one split writes them; with context splits (grid
// z, the same mla_splits as that kernel) each split writes its partial rows for merge_kernel.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "attention/cuda/mla_kernels.h"
#include "attention/cuda/tensor_core_tile.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

using tensor_core::mma16816;
using tensor_core::pack_bf16;

constexpr int kCtaRows = 64;   // query rows (tokens x heads) a CTA
constexpr int kTileKeys = 32;  // cached rows a stage
constexpr int kMmaWarps = 8, kMmaThreads = kMmaWarps * 32;

// Shared memory of the <DP> kernel: Q [64][DP] and two stages [32][DP] of bf16 (swizzled, DP a
// multiple of 64 so the XOR stays in the row), the pairs' probability fragments [8 warps][32
// lanes] and their row maxima / sums [2][64].
template <int DP>
struct MmaSmem {
  static constexpr size_t q = size_t(kCtaRows) * DP * 2, stage = size_t(kTileKeys) * DP * 2;
  static constexpr size_t frags = kMmaWarps * 32 * 16, rows = 2 * kCtaRows * sizeof(float);
  static constexpr size_t bytes = q + 2 * stage + frags + rows;
};

// Barrier of the two warps that share rows 16 rg .. + 16 (ids 1 .. 4; 0 is __syncthreads).
__device__ __forceinline__ void pair_sync(int rg) { asm volatile("bar.sync %0, 64;\n" ::"r"(rg + 1) : "memory"); }

// One thread's share of a 32-key tile's loads: DP / 64 chunks of 8 elements (bf16: 16 bytes;
// e4m3: 8 bytes), chunk c = threadIdx.x + 256 k of the tile's 32 x DP / 8.
template <int DP, bool F8>
struct TileLoads {
  using Chunk = std::conditional_t<F8, uint2, uint4>;
  static constexpr int kChunks = DP / 64;
  Chunk v[kChunks];

  template <typename T>
  __device__ __forceinline__ void load(const MlaLaunch<T>& l, const int32_t* bt, int kv0, int kv_end) {
    const int D = l.d.latent();
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int c = int(threadIdx.x) + k * kMmaThreads, row = c / (DP / 8), ch = c % (DP / 8), j = kv0 + row;
      v[k] = Chunk{};
      if (j < kv_end && ch < D / 8) {
        const int64_t at = (int64_t(bt[j / l.block_size]) * l.block_size + j % l.block_size) * D + ch * 8;
        if constexpr (F8)
          v[k] = *reinterpret_cast<const uint2*>(l.cache8 + at);
        else
          v[k] = *reinterpret_cast<const uint4*>(l.cache + at);
      }
    }
  }

  __device__ __forceinline__ void store(uint16_t* stage) const {
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int c = int(threadIdx.x) + k * kMmaThreads, row = c / (DP / 8), ch = c % (DP / 8);
      uint4 b;
      if constexpr (F8) {
        const uint2 lo = e4m3x4_to_bf16(v[k].x), hi = e4m3x4_to_bf16(v[k].y);
        b = make_uint4(lo.x, lo.y, hi.x, hi.y);
      } else {
        b = v[k];
      }
      *reinterpret_cast<uint4*>(stage + swz<DP>(row, ch)) = b;
    }
  }
};

// The tile's Q rows (row = token * HG + head) from q_latent, rounded to bf16; zeros past the
// tile's tokens, the group's heads and the latent width.
template <int DP>
__device__ __forceinline__ void load_q(const MlaLaunch<uint16_t>& l, int t0, int ntok, int h0, int HG, uint16_t* q_s) {
  const int D = l.d.latent(), H = l.d.heads;
  for (int c = int(threadIdx.x); c < kCtaRows * DP / 8; c += kMmaThreads) {
    const int row = c / (DP / 8), ch = c % (DP / 8), tl = row / HG, h = h0 + row % HG;
    uint4 b = make_uint4(0, 0, 0, 0);
    if (tl < ntok && row < kCtaRows / HG * HG && h < H && ch < D / 8) {
      const float4* src = reinterpret_cast<const float4*>(l.q_latent + (int64_t(t0 + tl) * H + h) * D + ch * 8);
      const float4 a = src[0], e = src[1];
      b = make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(e.x, e.y), pack_bf16(e.z, e.w));
    }
    *reinterpret_cast<uint4*>(q_s + swz<DP>(row, ch)) = b;
  }
}

template <int DP, int LH, bool F8>
__global__ void __launch_bounds__(kMmaThreads, 1) attend_mma_kernel(MlaLaunch<uint16_t> l) {
  static_assert(DP % 64 == 0 && LH % 16 == 0 && 2 * LH <= DP, "swizzled rows, 16-column value fragments");
  using Smem = MmaSmem<DP>;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* stages = reinterpret_cast<uint16_t*>(smem_raw + Smem::q);
  uint4* frag_s = reinterpret_cast<uint4*>(smem_raw + Smem::q + 2 * Smem::stage);
  float* row_s = reinterpret_cast<float*>(smem_raw + Smem::q + 2 * Smem::stage + Smem::frags);  // [2][64]
  const MlaDims& d = l.d;
  const int H = d.heads, L = d.kv_lora_rank, HG = min(H, kCtaRows), TPT = kCtaRows / HG;
  const int h0 = int(blockIdx.y) * HG;
  pdl_wait();
  pdl_trigger();
  tensor_core::TileInfo ti;
  if (!tensor_core::locate_tile(l.qsl, l.num_reqs, l.num_tokens, TPT, ti, nullptr, 0)) return;

  // Keys [0, kv_end); the tile's token tl sees n0 + tl of them (the padded tail: none).
  int n0 = 0, kv_end = 0;
  const int32_t* bt = l.block_table;
  if (ti.r < l.num_reqs) {
    n0 = l.seq_lens[ti.r] - ti.qlen + ti.first + 1;
    kv_end = min(n0 + ti.ntok - 1, l.max_blocks * l.block_size);
    bt += int64_t(ti.r) * l.max_blocks;
  }
  // Split z of S (grid z) takes its share of the key tiles, in order, so the splits holding keys
  // are a prefix (what merge_kernel reads).
  const int S = l.splits, z = int(blockIdx.z), n_all = (kv_end + kTileKeys - 1) / kTileKeys;
  const int chunk = (n_all + S - 1) / S, tile0 = min(n_all, z * chunk), n_tiles = min(n_all, tile0 + chunk) - tile0;
  const int t0 = ti.tok0 + ti.first, kv_lo = tile0 * kTileKeys;
  load_q<DP>(l, t0, ti.ntok, h0, HG, q_s);
  TileLoads<DP, F8> next;
  if (n_tiles > 0) {
    next.load(l, bt, kv_lo, kv_end);
    next.store(stages);
  }
  __syncthreads();

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, rg = warp % 4, half = warp / 4;
  const int r0 = 16 * rg + lane / 4;  // this thread's rows r0 and r0 + 8
  int lim[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = r0 + 8 * i, tl = row / HG;
    lim[i] = tl < ti.ntok && row < TPT * HG && h0 + row % HG < H ? min(n0 + tl, kv_end) : 0;
  }
  const float scale = F8 ? d.scale * l.cache_scale : d.scale, sl2 = scale * 1.4426950408889634f;
  float o[LH / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.0f, 0.0f};
  for (int it = 0; it < n_tiles; ++it) {
    const int kv0 = kv_lo + it * kTileKeys;
    const uint16_t* ks = stages + (it & 1) * kTileKeys * DP;
    if (it + 1 < n_tiles) next.load(l, bt, kv0 + kTileKeys, kv_end);
    // S: rows 16 rg .. + 16, keys kv0 + 16 half .. + 16 (n-tiles 0, 1).
    float s[2][4] = {};
#pragma unroll 4
    for (int kk = 0; kk < DP / 16; ++kk) {
      uint32_t a[4], b[4];
      ldsm_x4(a, q_s + swz<DP>(16 * rg + (lane & 15), kk * 2 + (lane >> 4)));
      ldsm_x4(b, ks + swz<DP>(16 * half + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)));
      mma16816(s[0], a, b[0], b[1]);
      mma16816(s[1], a, b[2], b[3]);
    }
    float mx[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = kv0 + 16 * half + nt * 8 + 2 * (lane & 3) + e;
          if (key >= lim[i]) s[nt][2 * i + e] = -INFINITY;
          mx[i] = fmaxf(mx[i], s[nt][2 * i + e]);
        }
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      if ((lane & 3) == 0) row_s[half * kCtaRows + r0 + 8 * i] = mx[i];
    }
    pair_sync(rg);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float mnew = fmaxf(m[i], fmaxf(mx[i], row_s[(1 - half) * kCtaRows + r0 + 8 * i]) * sl2);
      const float base = mnew == -INFINITY ? 0.0f : mnew, corr = tensor_core::fast_exp2(m[i] - base);
      m[i] = mnew;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = tensor_core::fast_exp2(fmaf(s[nt][2 * i + e], sl2, -base));
          s[nt][2 * i + e] = p;
          sum += p;
        }
      lsum[i] = lsum[i] * corr + sum;
#pragma unroll
      for (int nd = 0; nd < LH / 8; ++nd) o[nd][2 * i] *= corr, o[nd][2 * i + 1] *= corr;
    }
    const uint4 own = make_uint4(pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]), pack_bf16(s[1][0], s[1][1]),
                                 pack_bf16(s[1][2], s[1][3]));
    frag_s[warp * 32 + lane] = own;
    pair_sync(rg);
    const uint4 other = frag_s[(warp ^ 4) * 32 + lane];
    // O (columns LH half .. + LH) += P V over the tile's two 16-key steps.
#pragma unroll
    for (int kstep = 0; kstep < 2; ++kstep) {
      const uint4 pk = kstep == half ? own : other;
      const uint32_t a[4] = {pk.x, pk.y, pk.z, pk.w};
#pragma unroll
      for (int dp = 0; dp < LH / 16; ++dp) {
        uint32_t b[4];
        ldsm_x4_t(b, ks + swz<DP>(kstep * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                  half * (LH / 8) + dp * 2 + (lane >> 4)));
        mma16816(o[2 * dp], a, b[0], b[1]);
        mma16816(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    if (it + 1 < n_tiles) next.store(stages + ((it + 1) & 1) * kTileKeys * DP);
    __syncthreads();
  }
  // The pair's sums of each row meet. One split: normalised rows (zeros without keys) into
  // o_latent; several: the unnormalised rows into o_part and each row's (max, sum) into ml_part, the
  // max as the CUDA-core attend keeps it (natural log: scores times the softmax scale), for merge.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    lsum[i] = tensor_core::quad_sum(lsum[i]);
    if ((lane & 3) == 0) row_s[half * kCtaRows + r0 + 8 * i] = lsum[i];
  }
  pair_sync(rg);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = r0 + 8 * i, tl = row / HG, h = h0 + row % HG;
    if (tl >= ti.ntok || row >= TPT * HG || h >= H) continue;
    const float total = lsum[i] + row_s[(1 - half) * kCtaRows + row], v_scale = F8 ? l.cache_scale : 1.0f;
    const float inv = S > 1 ? v_scale : total > 0.0f ? v_scale / total : 0.0f;
    const int64_t out_row = S > 1 ? (int64_t(t0 + tl) * S + z) * H + h : int64_t(t0 + tl) * H + h;
    float* dst = (S > 1 ? l.o_part : l.o_latent) + out_row * L + half * LH + 2 * (lane & 3);
    if (S > 1 && half == 0 && (lane & 3) == 0) {
      l.ml_part[2 * out_row] = m[i] == -INFINITY ? -FLT_MAX : m[i] * 0.6931471805599453f;
      l.ml_part[2 * out_row + 1] = total;
    }
#pragma unroll
    for (int nd = 0; nd < LH / 8; ++nd)
      *reinterpret_cast<float2*>(dst + nd * 8) = make_float2(o[nd][2 * i] * inv, o[nd][2 * i + 1] * inv);
  }
}

// The kernel of these dims and cache, or null where none is built: the latent width padded to
// DP (DeepSeek-V2/V3's 512 + 64 -> 576; the kernel tests' 64 + 16 -> 128), LH = L / 2.
using AttendMma = void (*)(MlaLaunch<uint16_t>);
template <bool F8>
AttendMma attend_mma_for(const MlaDims& d, size_t* smem) {
  const int D = d.latent(), DP = (D + 63) / 64 * 64, L = d.kv_lora_rank;
  const auto pick = [&](auto kernel, size_t bytes) {
    *smem = bytes;
    return static_cast<AttendMma>(kernel);
  };
  if (D % 8 != 0) return nullptr;
  if (DP == 576 && L == 512) return pick(attend_mma_kernel<576, 256, F8>, MmaSmem<576>::bytes);
  if (DP == 128 && L == 64) return pick(attend_mma_kernel<128, 32, F8>, MmaSmem<128>::bytes);
  return nullptr;
}

}  // namespace

bool mla_attend_mma_supported(const MlaDims& d) {
  size_t smem = 0;
  return attend_mma_for<false>(d, &smem) != nullptr;
}

cudaError_t prepare_mla_attend_mma(const MlaDims& d) {
  for (const bool f8 : {false, true}) {
    size_t smem = 0;
    const AttendMma k = f8 ? attend_mma_for<true>(d, &smem) : attend_mma_for<false>(d, &smem);
    if (!k) return cudaErrorInvalidValue;
    const cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_mla_attend_mma(const MlaLaunch<uint16_t>& l, cudaStream_t stream) {
  size_t smem = 0;
  const AttendMma k = l.cache8 ? attend_mma_for<true>(l.d, &smem) : attend_mma_for<false>(l.d, &smem);
  if (!k) return cudaErrorInvalidValue;
  const int HG = std::min(l.d.heads, kCtaRows), TPT = kCtaRows / HG;
  const dim3 grid(unsigned(l.num_tokens / TPT + l.num_reqs + 1), unsigned((l.d.heads + HG - 1) / HG),
                  unsigned(l.splits));
  return launch_pdl(k, grid, dim3(kMmaThreads), smem, stream, l);
}

}  // namespace gs::cuda
