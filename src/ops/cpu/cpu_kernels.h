// CPU kernels: plain functions over raw fp32 pointers, the bodies of the CPU backend's closures.
//
// They take only pointers and sizes so a closure that calls one can be recorded into a graph and
// replayed later against whatever the buffers then hold. Row counts are tokens (T) unless noted.
#pragma once
#include <cstdint>

#include "ops/gated_activation.h"

namespace gs::cpu {

void embedding(const int32_t* ids, const float* table, float* out, int64_t T, int64_t V, int64_t H);
// Rows of ids outside [first, first + V) are zero (vocab-parallel shard; cpu_shard.cpp).
void embedding_shard(const int32_t* ids, const float* table, int64_t first, float* out, int64_t T, int64_t V,
                     int64_t H);
void rms_norm(const float* x, const float* w, float eps, float* out, int64_t T, int64_t H);
// residual += x; out = rms_norm(residual). x may alias out.
void add_rms_norm(float* residual, const float* x, const float* w, float eps, float* out, int64_t T, int64_t H);
// In place, each head of width D in rows of width `row` (row % D == 0).
void head_rms_norm(float* x, const float* w, float eps, int64_t T, int64_t row, int64_t D);
// y[T, N] = x[T, K] w[N, K]^T (+ b[N]); b may be null.
void linear(const float* x, const float* w, const float* b, float* y, int64_t T, int64_t N, int64_t K);
// Rotate-half RoPE in place on `heads` heads of width D per row; inv_freq has D/2 entries.
// With long_from > 0, inv_freq has D entries and positions >= long_from use the second half.
void rope(float* x, const int32_t* pos, const float* inv_freq, int64_t T, int64_t heads, int64_t D, int long_from = 0);
// out[t, i] = act(gate_up[t, i]) * gate_up[t, I + i]
void gated_activation(GatedActivation act, const float* gate_up, float* out, int64_t T, int64_t I);
void gather_rows(const float* x, const int32_t* idx, float* out, int64_t n, int64_t rows, int64_t H);

}  // namespace gs::cpu
