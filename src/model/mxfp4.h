// MXFP4 (OCP microscaling FP4), the format of gpt-oss's expert weights on the Hub: each group of
// 32 values shares one e8m0 scale (a byte s: 2^(s - 127)) and stores its values as e2m1 nibbles,
// two a byte, the low nibble first (the even element). graphserve dequantizes them at load.
#pragma once
#include <cstdint>

namespace gs {

// The values of the 16 e2m1 codes: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6.
float e2m1_value(uint8_t code);

// blocks [rows, groups, 16] and scales [rows, groups] -> out [rows, groups * 32] f32, as
// transformers' convert_moe_packed_tensors (before its transpose).
void dequantize_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t groups, float* out);

}  // namespace gs
