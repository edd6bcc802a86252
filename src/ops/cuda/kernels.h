// Launchers of the CUDA backend's kernels: raw device pointers in, work enqueued on `s`.
//
// bf16 tensors are passed as uint16_t*; every launcher returns cudaGetLastError() so callers
// (host code in .cpp files) check each launch. Shapes are validated by the caller.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace gs::cuda {

using bf16_t = uint16_t;

// out[t, :] = table[ids[t], :]; rows of ids outside [0, V) are zeroed.
cudaError_t embedding(const int32_t* ids, const bf16_t* table, bf16_t* out, int T, int V, int H,
                      cudaStream_t s);
// out = x / rms(x) * w per row of H elements.
cudaError_t rms_norm(const bf16_t* x, const bf16_t* w, float eps, bf16_t* out, int T, int H,
                     cudaStream_t s);
// residual += x; out = rms_norm(residual). x may alias out.
cudaError_t add_rms_norm(bf16_t* residual, const bf16_t* x, const bf16_t* w, float eps, bf16_t* out,
                         int T, int H, cudaStream_t s);
// In place over every head of D elements: x [T, n_heads * D].
cudaError_t head_rms_norm(bf16_t* x, const bf16_t* w, float eps, int T, int n_heads, int D,
                          cudaStream_t s);
// Rotate-half rotary embedding, in place. inv_freq [D / 2] f32.
cudaError_t rope(bf16_t* q, bf16_t* k, const int32_t* positions, const float* inv_freq, int T,
                 int hq, int hkv, int D, cudaStream_t s);
// out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i].
cudaError_t silu_mul(const bf16_t* gate_up, bf16_t* out, int T, int I, cudaStream_t s);
// out[i, :] = x[idx[i], :] for rows of row_bytes bytes; idx outside [0, T) gives zeros.
cudaError_t gather_rows(const void* x, const int32_t* idx, void* out, int n, int T,
                        int64_t row_bytes, cudaStream_t s);
// out[i] = first index of the maximum of row i (x is f32 when x_f32, else bf16).
cudaError_t argmax(const void* x, bool x_f32, int32_t* out, int n, int V, cudaStream_t s);
// y[t, :] += bias (y f32 when y_f32, else bf16).
cudaError_t add_bias(void* y, bool y_f32, const bf16_t* bias, int T, int N, cudaStream_t s);
// Converts n f32 values to bf16 on the device (round to nearest even).
cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, cudaStream_t s);

// Small-M GEMV: y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) for M <= kGemvMaxM rows.
// Needs K % 8 == 0 and 16-byte aligned x and w (gemv_supported says whether it applies).
// Measured on an H200: faster than cuBLASLt at M = 1 (2048x2048: 4.1 vs 5.7 us), slower from
// M = 2 on for the large projections (it re-reads x from L1 per weight vector), so M = 1 only.
constexpr int kGemvMaxM = 1;
bool gemv_supported(int M, int K, const void* x, const void* w);
cudaError_t gemv(const bf16_t* x, const bf16_t* w, const bf16_t* bias, void* y, bool y_f32, int M,
                 int N, int K, cudaStream_t s);

}  // namespace gs::cuda
