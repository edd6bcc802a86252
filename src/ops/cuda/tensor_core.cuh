// The tensor-core building blocks the GEMM and attention kernels share: the bf16 MMA (one
// warp-wide m16n8k16 with fp32 accumulators; PTX mma.sync, A row-major 16 x 16, B column-major
// 16 x 8), the skinny and grouped GEMMs' split-K epilogue through shared memory, the asynchronous
// 16-byte copies into shared memory and the ldmatrix loads of fragments from it.
#pragma once
#include <cstdint>

namespace gs::cuda {

// c += a * b; a0..a3 and b0, b1 are the lane's fragment registers in PTX's layout.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The split-K epilogue of a warp tile of 16 weight rows (rows g and g + 8 of its A fragments) and
// MT / 8 token tiles: the warp's accumulators go to its partials `mine` [16][PS] ...
template <int MT>
__device__ __forceinline__ void store_tile_partials(float* mine, int PS, int g, int t, const float (&acc)[MT / 8][4]) {
#pragma unroll
  for (int nt = 0; nt < MT / 8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) mine[(g + 8 * (c >> 1)) * PS + nt * 8 + 2 * t + (c & 1)] = acc[nt][c];
}

// ... and, after a barrier, token m's R dot products of output j of tile tg are the sum of the KS
// shares' partials, in share order (the same result run to run). A tile's row r * OW + j is part
// r of output j; the CTA's partials are [tile][share][16][PS].
template <int R, int KS, int OW>
__device__ __forceinline__ void sum_tile_partials(const float* part, int PS, int tg, int j, int m, float (&v)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) v[r] = 0.0f;
#pragma unroll
  for (int s = 0; s < KS; ++s)
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] += part[((tg * KS + s) * 16 + r * OW + j) * PS + m];
}

// dst (shared) = src (global), 16 bytes, in the current cp.async group; wait_group<N> waits until
// at most N of this thread's committed groups are still in flight.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src));
}
// ... or zeros where !ok (src is then not read, but must be a valid address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Element offset of 16-byte chunk `ch` of row `row` in a [rows][D] bf16 tile: chunk index XOR
// (row mod 8), so the 8 rows an ldmatrix phase reads hit 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int ch) {
  return row * D + ((ch ^ (row & 7)) << 3);
}

// Four 8x8 b16 matrices from shared memory: lanes 8 i .. 8 i + 7 give the row addresses of matrix
// i, which lands in r[i] (x4_t: transposed).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

}  // namespace gs::cuda
