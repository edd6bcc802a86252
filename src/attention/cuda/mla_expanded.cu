// MLA's expanded form (mla_kernels.h, MlaExpandedLaunch): for a request of many queries, its
// context's k_nope and v are computed once (the caller's GEMM of the gathered latent rows by
// kv_b), and attention runs per head with head dims 192 (q_nope | q_pe against k_nope | k_pe) and
// 128 (v): 320 multiply-adds a (query, key, head) against the absorbed form's 1,088 (576 for the
// scores, 512 for the latent output), plus the context's up-projection, which a request of many
// queries shares.
//
// gather_kernel copies each request's cached latent rows (through its block table) into `lat`,
// widening an e4m3 cache to bf16 at its scale. expanded_kernel is FlashAttention-2 on Hopper's
// wgmma (the softmax of tensor_core_tile.cuh): a CTA of one warpgroup owns 64 query tokens of one
// head (grid x over the requests' tiles, longest first; grid y over the heads); Q is staged once
// (q_nope from q, the rotated q_pe from q_latent, rounded to bf16) and its fragments are read from
// shared memory by ldmatrix for each tile, which keeps the kernel at two CTAs an SM; S is twelve
// m64n64k16 steps over the K tile's three 64-column blocks, O two m64n64k16 halves over V's two
// blocks with P from registers. K (k_nope from kv, k_pe from lat: the head-shared rope part) and V
// tiles of 64 keys stream through two shared-memory stages by cp.async in the 128-byte swizzle,
// the next tile's copies in flight while the current one computes.
#include <cfloat>

#include "attention/cuda/mla_kernels.h"
#include "attention/cuda/tensor_core_tile.cuh"
#include "attention/cuda/tensor_core_wgmma.cuh"
#include "ops/cuda/e4m3.cuh"
#include "ops/cuda/launch.cuh"

namespace gs::cuda {

namespace {

using tensor_core::kKeys;
using tensor_core::pack_bf16;
using tensor_core::quad_sum;
using tensor_core::RowState;

constexpr int kNope = 128, kRope = 64, kDK = kNope + kRope, kDV = 128;
constexpr int kRows = kMlaExpandedTileTokens, kWarps = kRows / 16, kThreads = 32 * kWarps;  // a warp: 16 query rows
static_assert(kWarps == 4, "one warpgroup: wgmma's 64 rows");
constexpr int kGatherRows = 16;  // context rows a gather CTA copies

// Shared memory: Q [64][192] (swz<192>, read by ldmatrix), then two K stages of three [64 keys][64]
// blocks and two V stages of two (swz<64>: wgmma's 128-byte swizzle, 1024-byte aligned), bf16.
constexpr size_t kQBytes = size_t(kRows) * kDK * 2, kKBytes = size_t(kKeys) * kDK * 2,
                 kVBytes = size_t(kKeys) * kDV * 2;
constexpr size_t kSmemBytes = kQBytes + 2 * (kKBytes + kVBytes) + 1024;  // + the stages' 1024-byte alignment
constexpr int kBlock = kKeys * 64;  // elements of a [64 keys][64] block of a stage (wgmma's 128-byte swizzle)

__global__ void __launch_bounds__(kThreads) gather_kernel(const MlaExpandedLaunch l) {
  pdl_wait();
  pdl_trigger();
  const MlaExpandedRequest& rq = l.req[blockIdx.y];
  const int j0 = int(blockIdx.x) * kGatherRows;
  if (j0 >= rq.ctx) return;
  const int D = l.d.latent(), CPR = D / 8, n = min(kGatherRows, rq.ctx - j0);
  const int32_t* bt = l.block_table + int64_t(rq.row) * l.max_blocks;
  for (int c = int(threadIdx.x); c < n * CPR; c += kThreads) {
    const int j = j0 + c / CPR, ch = c % CPR;
    const int64_t at = (int64_t(bt[j / l.block_size]) * l.block_size + j % l.block_size) * D + ch * 8;
    uint4 v;
    if (l.cache8) {
      const uint2 e = *reinterpret_cast<const uint2*>(l.cache8 + at);
      const uint2 lo = e4m3x4_to_bf16(e.x), hi = e4m3x4_to_bf16(e.y);
      const uint32_t w[4] = {lo.x, lo.y, hi.x, hi.y};
      uint32_t s[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        s[i] =
            pack_bf16(__uint_as_float(w[i] << 16) * l.cache_scale, __uint_as_float(w[i] & 0xffff0000u) * l.cache_scale);
      v = make_uint4(s[0], s[1], s[2], s[3]);
    } else {
      v = *reinterpret_cast<const uint4*>(l.cache + at);
    }
    *reinterpret_cast<uint4*>(l.lat + int64_t(rq.kv0 + j) * D + ch * 8) = v;
  }
}

// The tile's Q rows [0, 64) <- tokens t0 + row of head h (zeros from ntok on): q_nope's 16 chunks by
// cp.async, the rotated q_pe's 8 rounded from f32.
__device__ __forceinline__ void load_q_tile(const MlaExpandedLaunch& l, int h, int t0, int ntok, uint16_t* q_s) {
  constexpr int CPR = kDK / 8;
  const int H = l.d.heads, L = l.d.kv_lora_rank, D = l.d.latent();
  for (int c = int(threadIdx.x); c < kRows * CPR; c += kThreads) {
    const int row = c / CPR, ch = c % CPR;
    const bool ok = row < ntok;
    const int64_t th = int64_t(t0 + (ok ? row : 0)) * H + h;
    if (ch < kNope / 8) {
      cp_async16(q_s + swz<kDK>(row, ch), l.q + th * kDK + ch * 8, ok);
      continue;
    }
    uint4 b = make_uint4(0, 0, 0, 0);
    if (ok) {
      const float4* src = reinterpret_cast<const float4*>(l.q_latent + th * D + L + (ch - kNope / 8) * 8);
      const float4 a = src[0], e = src[1];
      b = make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(e.x, e.y), pack_bf16(e.z, e.w));
    }
    *reinterpret_cast<uint4*>(q_s + swz<kDK>(row, ch)) = b;
  }
}

// Rows [0, 64) of one stage <- COLS 16-byte chunks of keys kv0 + row from src (row j of the
// request at src + j * stride; zeros from kv_end on), landing at chunk c0 + ch of the stage's rows
// (block (c0 + ch) / 8): a thread copies one chunk column of every (kThreads / COLS)-th row, its
// addresses one add apart.
template <int COLS>
__device__ __forceinline__ void load_rows(uint16_t* stage, int c0, const uint16_t* src, int64_t stride, int kv0,
                                          int kv_end) {
  constexpr int RPP = kThreads / COLS;  // rows a pass
  static_assert(kThreads % COLS == 0 && kKeys % RPP == 0, "whole rows a pass, whole passes a tile");
  const int ch = int(threadIdx.x) % COLS, r0 = int(threadIdx.x) / COLS, c = c0 + ch;
  uint16_t* block = stage + c / 8 * kBlock;
  const uint16_t* p = src + int64_t(kv0 + r0) * stride + ch * 8;
#pragma unroll
  for (int i = 0; i < kKeys / RPP; ++i) {
    const int row = r0 + i * RPP;
    const bool ok = kv0 + row < kv_end;
    cp_async16(block + swz<64>(row, c % 8), ok ? p + int64_t(i) * RPP * stride : src, ok);
  }
}

// Keys [kv0, kv0 + 64) of the request whose rows start at `base` (zeros from kv_end on) -> one K
// stage (k_nope from kv, k_pe from lat) and one V stage (v from kv), head h.
__device__ __forceinline__ void load_kv_tile(const MlaExpandedLaunch& l, int h, int base, int kv0, int kv_end,
                                             uint16_t* ks, uint16_t* vs) {
  const int64_t kv_row = int64_t(l.d.heads) * (kNope + kDV), D = l.d.latent();
  const uint16_t* kvh = l.kv + int64_t(base) * kv_row + int64_t(h) * (kNope + kDV);
  load_rows<kNope / 8>(ks, 0, kvh, kv_row, kv0, kv_end);
  load_rows<kRope / 8>(ks, kNope / 8, l.lat + int64_t(base) * D + l.d.kv_lora_rank, D, kv0, kv_end);
  load_rows<kDV / 8>(vs, 0, kvh + kNope, kv_row, kv0, kv_end);
}

// One 64-key tile for the warpgroup's 64 query rows on wgmma: S = Q K^T as twelve m64n64k16 steps
// (Q's fragments from shared memory every tile, as the D 64 paged kernel does: kept live across the
// loop, registers wgmma reads asynchronously get reused), the softmax step, then O += P V as two
// m64n64k16 halves of v's 128 columns, P from the S accumulators.
__device__ __forceinline__ void attend_tile_wg(const uint16_t* q_s, const uint16_t* ks, const uint16_t* vs,
                                               RowState<kDV>& st, bool mask, int kv0, const int (&lim)[2],
                                               const int (&lo)[2], float sl2) {
  using tensor_core::wgmma_m64n64k16;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  uint32_t qf[kDK / 16][4];
#pragma unroll
  for (int kk = 0; kk < kDK / 16; ++kk) ldsm_x4(qf[kk], q_s + swz<kDK>(warp * 16 + (lane & 15), kk * 2 + (lane >> 4)));
  float s[8][4];
  reg_fence(qf);
  reg_fence(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kDK / 16; ++kk)
    wgmma_m64n64k16<0>(s, qf[kk], sw128_desc(ks + kk / 4 * kBlock) + 2 * (kk % 4), kk);
  wgmma_commit();
  wgmma_wait_all();
  reg_fence(s);
  reg_fence(qf);
  tensor_core::softmax_step<kDV>(s, st, mask, kv0, lim, lo, sl2);
  uint32_t a[4][4];
  tensor_core::p_fragments(s, a);
  auto& o0 = *reinterpret_cast<float(*)[8][4]>(&st.o[0]);
  auto& o1 = *reinterpret_cast<float(*)[8][4]>(&st.o[8]);
  const uint64_t vd0 = sw128_desc(vs), vd1 = sw128_desc(vs + kBlock);
  reg_fence(a);
  reg_fence(o0);
  reg_fence(o1);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    wgmma_m64n64k16<1>(o0, a[kk], vd0 + 128 * kk, 1);
    wgmma_m64n64k16<1>(o1, a[kk], vd1 + 128 * kk, 1);
  }
  wgmma_commit();
  wgmma_wait_all();
  reg_fence(o0);
  reg_fence(o1);
}

__global__ void __launch_bounds__(kThreads, 2) expanded_kernel(const MlaExpandedLaunch l) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  const uint32_t sa = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  uint8_t* const base = smem_raw + (1024 - sa % 1024) % 1024;  // Q's 24 KiB keep the stages aligned too
  uint16_t* q_s = reinterpret_cast<uint16_t*>(base);
  uint16_t* k_s[2] = {reinterpret_cast<uint16_t*>(base + kQBytes),
                      reinterpret_cast<uint16_t*>(base + kQBytes + kKBytes)};
  uint16_t* v_s[2] = {reinterpret_cast<uint16_t*>(base + kQBytes + 2 * kKBytes),
                      reinterpret_cast<uint16_t*>(base + kQBytes + 2 * kKBytes + kVBytes)};
  pdl_wait();
  pdl_trigger();
  int ri = 0;
  for (int i = 1; i < l.num_reqs; ++i)
    if (l.req[i].tile0 <= int(blockIdx.x)) ri = i;
  const MlaExpandedRequest rq = l.req[ri];
  const int ntiles = (rq.qlen + kRows - 1) / kRows, idx = int(blockIdx.x) - rq.tile0;
  if (idx >= ntiles) return;
  const int first = (ntiles - 1 - idx) * kRows, ntok = min(kRows, rq.qlen - first), h = int(blockIdx.y);
  const int p0 = rq.ctx - rq.qlen + first;  // the tile's first query's position: it sees keys [0, p0]
  const int kv_end = p0 + ntok, n_tiles = (kv_end + kKeys - 1) / kKeys;
  load_q_tile(l, h, rq.tok0 + first, ntok, q_s);
  load_kv_tile(l, h, rq.kv0, 0, kv_end, k_s[0], v_s[0]);
  cp_async_commit();

  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  RowState<kDV> st[1];
#pragma unroll
  for (int nd = 0; nd < kDV / 8; ++nd) st[0].o[nd][0] = st[0].o[nd][1] = st[0].o[nd][2] = st[0].o[nd][3] = 0.0f;
  st[0].m[0] = st[0].m[1] = -INFINITY;
  st[0].l[0] = st[0].l[1] = 0.0f;
  int lim[1][2], lo[1][2] = {{0, 0}};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = warp * 16 + (lane >> 2) + 8 * i;
    lim[0][i] = row < ntok ? p0 + row + 1 : 0;  // causal: up to its own position
  }
  const float sl2 = l.d.scale * 1.4426950408889634f;
  for (int it = 0; it < n_tiles; ++it) {
    if (it + 1 < n_tiles) load_kv_tile(l, h, rq.kv0, (it + 1) * kKeys, kv_end, k_s[(it + 1) & 1], v_s[(it + 1) & 1]);
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();  // Q's stores and this tile's copies, for wgmma's reads
    __syncthreads();
    const int kv0 = it * kKeys;
    attend_tile_wg(q_s, k_s[it & 1], v_s[it & 1], st[0], kv0 + kKeys > p0 + 1, kv0, lim[0], lo[0], sl2);
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = warp * 16 + (lane >> 2) + 8 * i;
    const float sum = quad_sum(st[0].l[i]), inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    if (row >= ntok) continue;
    uint16_t* dst = l.out + (int64_t(rq.tok0 + first + row) * l.d.heads + h) * kDV + 2 * (lane & 3);
#pragma unroll
    for (int nd = 0; nd < kDV / 8; ++nd)
      *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf16(st[0].o[nd][2 * i] * inv, st[0].o[nd][2 * i + 1] * inv);
  }
}

}  // namespace

bool mla_expanded_supported(const MlaDims& d) {
  return d.nope == kNope && d.rope == kRope && d.v == kDV && d.kv_lora_rank % 8 == 0;
}

cudaError_t prepare_mla_expanded() {
  return cudaFuncSetAttribute(expanded_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
}

cudaError_t launch_mla_gather(const MlaExpandedLaunch& l, cudaStream_t stream) {
  if (l.num_reqs <= 0 || l.num_reqs > kMlaMaxExpandedReqs || !mla_expanded_supported(l.d)) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((l.max_ctx + kGatherRows - 1) / kGatherRows), unsigned(l.num_reqs));
  const cudaError_t err = launch_pdl(gather_kernel, grid, dim3(kThreads), 0, stream, l);
  return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t launch_mla_expanded(const MlaExpandedLaunch& l, cudaStream_t stream) {
  if (l.num_reqs <= 0 || l.num_reqs > kMlaMaxExpandedReqs || !mla_expanded_supported(l.d)) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(l.num_tiles), unsigned(l.d.heads));
  const cudaError_t err = launch_pdl(expanded_kernel, grid, dim3(kThreads), kSmemBytes, stream, l);
  return err != cudaSuccess ? err : cudaGetLastError();
}

}  // namespace gs::cuda
