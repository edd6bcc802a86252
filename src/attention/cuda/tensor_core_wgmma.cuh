// wgmma (sm_90a) form of one K/V tile of the tensor-core attention kernel (tensor_core_attention.cuh):
// m64n64k16 for head dim 64 (descriptors and fences: ops/cuda/wgmma.cuh).
// Included by tensor_core_attention.cuh and mla_expanded.cu.
#pragma once
#include "attention/cuda/tensor_core_tile.cuh"
#include "ops/cuda/wgmma.cuh"

namespace gs::cuda::tensor_core {

using cuda::fence_proxy_async;
using cuda::reg_fence;
using cuda::sw128_desc;
using cuda::wgmma_commit;
using cuda::wgmma_fence;
using cuda::wgmma_wait_all;

// d (64 x 64 per warpgroup, f32; this thread's d[nt][e] as an m16n8 C fragment of its warp's
// 16 rows) = a (registers: the warp's m16k16 A fragment, bf16) x B (descriptor; TRANS_B 1: B
// stored N-contiguous) + (accumulate ? d : 0).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TRANS_B), "r"(accumulate)
      : "memory");
}

// P (the softmax step's 64 x 64 probabilities in S's accumulator layout) -> the four m16k16 A
// fragments, bf16, that O += P V reads from registers.
__device__ __forceinline__ void p_fragments(const float (&s)[8][4], uint32_t (&a)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    a[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    a[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// attend_tile on wgmma for one warp of a warpgroup (D 64): the warpgroup's 64 rows against one
// 64-key tile. K rows are K-major B (each k16 step 32 bytes further along the row); V rows are
// N-contiguous B read transposed (each k16 step 16 keys = 2048 bytes further).
__device__ __forceinline__ void attend_tile_wg(uint32_t (&qf)[1][4][4], const uint16_t* ks, const uint16_t* vs,
                                               RowState<64> (&st)[1], bool mask, int kv0, const int (&lim)[1][2],
                                               const int (&lo)[1][2], float sl2) {
  float s[8][4];
  const uint64_t kd = sw128_desc(ks), vd = sw128_desc(vs);
  // Register operands (Q's and P's fragments, the accumulators) pinned on both sides of the
  // wgmmas that read or write them asynchronously, as CUTLASS's warpgroup_fence_operand does.
  reg_fence(qf[0]);
  reg_fence(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k16<0>(s, qf[0][kk], kd + 2 * kk, kk);
  wgmma_commit();
  wgmma_wait_all();
  reg_fence(s);
  reg_fence(qf[0]);
  softmax_step<64>(s, st[0], mask, kv0, lim[0], lo[0], sl2);
  uint32_t a[4][4];
  p_fragments(s, a);
  reg_fence(a);
  reg_fence(st[0].o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k16<1>(st[0].o, a[kk], vd + 128 * kk, 1);
  wgmma_commit();
  wgmma_wait_all();
  reg_fence(st[0].o);
}

}  // namespace gs::cuda::tensor_core
