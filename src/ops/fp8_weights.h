// FP8 (e4m3) weights: the host reference of their quantization, shared by every backend.
//
// A quantized weight [N, K] is e4m3 values q with f32 scales [N, G] (core/tensor.h
// Tensor::scales): w[n, k] = q[n, k] * scales[n, G == 1 ? 0 : k / 128]. Scales are amax / 448
// of a group of rows by K (or 128) columns, so the group's largest value maps to e4m3's largest.
#pragma once
#include <cstdint>

namespace gs {

constexpr int64_t kFp8BlockK = 128;  // columns per scale of block-scaled weights

// Quantizes src [r, K] (row-major f32) with groups of group_rows rows by K columns (128 when
// block128). Writes whichever outputs are non-null: q [r, K] e4m3 bytes, scales [r, G] (each row
// its group's scale), deq [r, K] = q * scale (may alias src).
void fp8_quantize_host(const float* src, int64_t r, int64_t K, int64_t group_rows, bool block128, uint8_t* q,
                       float* scales, float* deq);

// The scale of a group whose largest magnitude is amax (1 for an all-zero group).
inline float fp8_scale_of(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

}  // namespace gs
