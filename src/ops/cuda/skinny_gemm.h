// Skinny GEMM for decode batches (2 <= M <= 128 tokens), bf16 in, fp32 accumulate: y[M, N] =
// x[M, K] w[N, K]^T on tensor cores (mma.sync m16n8k16 with the weight rows as the MMA's M side,
// i.e. y^T = w x^T, so a handful of tokens never pads a 16-row tile). Built for bandwidth like the
// M = 1 GEMV: each warp streams its 16 weight rows once into registers with 16-byte loads; where N
// leaves too few warps, K is split over the warps of a CTA and the partial sums are added in
// shared memory in a fixed order (identical output run to run). The epilogues of the GEMV
// (ops/cuda/linear_epilogues.cuh) fold into it: + bias, gated MLP, QKV + RoPE. Launched with PDL:
// the first weight loads come before pdl_wait().
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/kernels.h"
#include "ops/gated_activation.h"

namespace gs::cuda {

constexpr int kSkinnyMinM = 2;
constexpr int kSkinnyMaxM = 128;

// Where the backend uses it (docs/PERF.md, "Skinny decode GEMM"): up to kSkinnyTokens tokens on
// weights of at most kSkinnyMaxWeights elements (it streams the weights faster than cuBLASLt there;
// from 32 tokens on, or on larger weights, cuBLASLt is as fast or faster).
constexpr int kSkinnyTokens = 16;
constexpr int64_t kSkinnyMaxWeights = int64_t(1) << 25;
// Small weights (at most 2^23 elements: smollm2-135m's and qwen3-0.6b's projections, llama3.2-1b's
// qkv and o_proj) go on up to kSkinnySmallTokens tokens: there cuBLASLt is launch- and ramp-bound
// and the fused epilogues take the RoPE / activation kernels with them.
constexpr int64_t kSkinnySmallWeights = int64_t(1) << 23;
constexpr int kSkinnySmallTokens = 32;

// Whether the backend sends M rows of K bf16 inputs times w [N, K] (N rows, all of them the fused
// epilogue's) here: the limits above, K a multiple of 32, x and w 16-byte aligned.
bool skinny_supported(int M, int64_t N, int K, const void* x, const void* w);

// y[m, n] = x[m] . w[n] (+ bias[n]); y bf16 or f32 (y_f32), [M, N].
cudaError_t skinny_gemm(const bf16_t* x, const bf16_t* w, const bf16_t* bias, void* y, bool y_f32, int M, int N, int K,
                        cudaStream_t s);
// out[m, i] = act(x[m] . w[i]) * (x[m] . w[I + i]) for w = [gate; up] [2I, K], out [M, I]; the dot
// products are rounded to bf16 first, so this equals skinny_gemm into gate_up then
// gated_activation.
cudaError_t skinny_gemm_gated(GatedActivation act, const bf16_t* x, const bf16_t* w, bf16_t* out, int M, int I, int K,
                              cudaStream_t s);
// gemv_qkv_rope's contract for M tokens: token m rotated at positions[m]; q [M, hq D], k, v
// [M, hkv D]; bias [(hq + 2 hkv) D] or null. The biased dot products are rounded to bf16 before
// the rotation, as skinny_gemm then split_qkv_rope (no q/k norm) round them.
cudaError_t skinny_gemm_qkv_rope(const bf16_t* x, const bf16_t* w, const bf16_t* bias, const int32_t* positions,
                                 const float* inv_freq, bf16_t* q, bf16_t* k, bf16_t* v, int M, int hq, int hkv, int D,
                                 int K, int long_from, cudaStream_t s);

// The same kernel on FP8 e4m3 weights (ops/fp8_weights.h): w [N, K] bytes, each 16-byte load
// widened to bf16 in registers for the bf16 MMAs; half the bytes of bf16 for the same outputs. With
// one f32 scale a row, the row's scale is applied to its dot product before the epilogue, from one
// token (a tile of 8 tokens up to 8) to kSkinnyMaxM. With 128x128 block scales (one a row and 128
// k: scales [N, K / 128], K a multiple of 128) each 128 k's products are scaled as they are added,
// up to kFp8BlockSkinnyMaxM tokens. x is a GemvInput: the bf16 rows, or at one token the norm of
// the f32 residual computed in the kernel (x = residual * norm_w rounded to bf16, the dot products
// scaled by 1 / rms: results differ from rms_norm then the projection by bf16 rounding only).
constexpr int kFp8BlockSkinnyMaxM = 16;
struct Fp8Scaled {
  const uint8_t* w;             // [N, K] e4m3
  const float* scales;          // [N, groups]
  int groups = 1;               // 1, or K / 128
  bool blocks_aligned = false;  // blocks: every 128x128 block starts on a multiple of 128 rows
};
// Whether it takes M tokens of K (a multiple of 64; of 128 with block scales) with `groups` scales
// a row (x and w 16-byte aligned).
bool fp8_skinny_supported(int M, int K, int groups, const void* x, const void* w);
// Whether it takes the norm fused (x a GemvInput of the f32 residual [1, K] and norm_w [K]): one
// token, K at most 32768, residual and norm_w 16-byte aligned.
bool fp8_skinny_norm_supported(int M, int K, int groups, const float* residual, const bf16_t* norm_w, const void* w);
// y[m, n] = x[m] . (w[n] scaled) (+ bias[n]); y bf16 or f32.
cudaError_t fp8_skinny_gemm(const GemvInput<bf16_t>& x, const Fp8Scaled& w, const bf16_t* bias, void* y, bool y_f32,
                            int M, int N, int K, cudaStream_t s);
// At one token, gemv_peer_sum (ops/cuda/kernels.h) on FP8 weights: this rank's partial x . (w[n]
// scaled) into y and the peers' exchange buffers, the last block's sum over the ranks into the
// residual and its norm into out; fp8_skinny_peer_sum_supported says which N it takes.
bool fp8_skinny_peer_sum_supported(int N);
cudaError_t fp8_skinny_gemm_peer_sum(const bf16_t* x, const Fp8Scaled& w, bf16_t* y, float* residual,
                                     const bf16_t* norm_w, float eps, bf16_t* out, int N, int K, const PeerSum& ps,
                                     cudaStream_t s);
// residual[m, n] += x[m] . (w[n] scaled) rounded to bf16 (linear + add_rms_norm's add).
cudaError_t fp8_skinny_gemm_add_residual(const GemvInput<bf16_t>& x, const Fp8Scaled& w, float* residual, int M, int N,
                                         int K, cudaStream_t s);
// skinny_gemm_gated and skinny_gemm_qkv_rope on FP8 rows; the RoPE split also with Qwen3's q / k
// head norm (a QkNorm; skinny_qk_norm_supported(D), up to kSkinnyHeadNormMaxM tokens): each head's
// CTAs a thread-block cluster that sums the squares of its outputs (rounded to bf16, as
// split_qkv_rope reads them) before the norm and the rotation.
constexpr int kSkinnyHeadNormMaxM = 8;
// Whether the head norm takes head dim D (a head's D / 2 pairs split evenly into the CTAs of a
// cluster of at most 8: 64 and 128 do).
bool skinny_qk_norm_supported(int D);
cudaError_t fp8_skinny_gemm_gated(GatedActivation act, const GemvInput<bf16_t>& x, const Fp8Scaled& w, bf16_t* out,
                                  int M, int I, int K, cudaStream_t s);
cudaError_t fp8_skinny_gemm_qkv_rope(const GemvInput<bf16_t>& x, const Fp8Scaled& w, const bf16_t* bias,
                                     const int32_t* positions, const float* inv_freq, bf16_t* q, bf16_t* k, bf16_t* v,
                                     int M, int hq, int hkv, int D, int K, int long_from, cudaStream_t s,
                                     const QkNorm<bf16_t>& qk = {});

}  // namespace gs::cuda
