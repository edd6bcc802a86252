// Launchers of the FP8 (e4m3) weight kernels (ops/fp8_weights.h has the format): quantization at
// load, the decode GEMV that streams FP8 weights, and dequantization to bf16 for the GEMM path.
// Raw device pointers in, work enqueued on `s`, cudaGetLastError() out; callers check shapes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

// amax[gr * G + gc] = max |src| over rows [gr gr_rows, ...) and columns [gc gk, ...) of src [r, K]
// (f32), gk = K / 128-column groups (G = ceil(K / gk)); then q = e4m3(src / scale) (round to
// nearest even, saturating) and scales [r, G] (each row its group's amax / 448, 1 when zero).
// amax has ceil(r / group_rows) * G floats of scratch.
cudaError_t fp8_quantize(const float* src, int r, int K, int group_rows, bool block128, float* amax, uint8_t* q,
                         float* scales, cudaStream_t s);

// Dynamic per-token activation scales: q [M, K] = e4m3(x / scales[m]), scales[m] = amax of
// x's row m / 448 (x bf16).
cudaError_t fp8_quantize_rows(const uint16_t* x, int M, int K, uint8_t* q, float* scales, cudaStream_t s);

// Dynamic activation scales per token and 128 columns, for 128x128 block-scaled weights (K a
// multiple of 128): q [M, K] = e4m3(x / s), s = that group's amax / 448 (1 when zero), stored
// token-minor: scales[g * M + m] (cuBLASLt's VEC128 layout for x as its K x M operand).
cudaError_t fp8_quantize_groups(const uint16_t* x, int M, int K, uint8_t* q, float* scales, cudaStream_t s);

// A 128x128 block-scaled weight's block grid [ceil(N / 128), G] (row-major) from its per-row
// scales [N, G] (each block's rows repeat its scale): rows 0, 128, 256, ...
cudaError_t fp8_block_grid(const float* row_scales, int N, int G, float* grid, cudaStream_t s);

// out [N, K] bf16 = q * scales (scales [N, G], G = 1 or ceil(K / 128)).
cudaError_t fp8_dequantize(const uint8_t* q, const float* scales, int G, uint16_t* out, int N, int K, cudaStream_t s);

// The FP8 GEMM's epilogue when the library multiplies unit-scaled e4m3 operands: y [M, N] (bf16,
// in place) = y * x_scales[m] * w_scales[n] + bias[n] (bias bf16, or null), rounded once to bf16.
cudaError_t fp8_scale_output(uint16_t* y, const float* x_scales, const float* w_scales, const uint16_t* bias, int M,
                             int N, cudaStream_t s);

// The most tokens the FP8 GEMV takes (one warp an output, every token's row of x in registers).
constexpr int kFp8GemvMaxM = 8;
// Whether fp8_gemv takes M tokens of K (K a multiple of 16, x and w 16-byte aligned).
bool fp8_gemv_supported(int M, int K, const void* x, const void* w);
// y [M, N] (bf16, or f32 when y_f32) = x [M, K] (bf16) w^T, w [N, K] e4m3 with scales [N, G]
// (G = 1: applied once per output; else per 128 columns), + bias [N] (bf16) when non-null.
cudaError_t fp8_gemv(const uint16_t* x, const uint8_t* w, const float* scales, int G, const uint16_t* bias, void* y,
                     bool y_f32, int M, int N, int K, cudaStream_t s);

}  // namespace gs::cuda
