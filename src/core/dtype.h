// DType: element types of tensors, and host conversions between them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gs {

// F8E4M3: OCP float8 e4m3 ("fn": no infinities, max 448), the storage of FP8 weights.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8, F8E4M3 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);      // "f32", "f16", "bf16", "i32", "i64", "u8", "f8e4m3"
DType parse_dtype(std::string_view name);  // accepts names above and torch-style ("float32", "bfloat16", ...)

// Host conversions (round-to-nearest-even for narrowing).
inline float bf16_to_f32(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}
float f16_to_f32(uint16_t v);
// e4m3 ("fn"): exact decode; encode rounds to nearest even and saturates to +-448 (NaN stays NaN).
float f8e4m3_to_f32(uint8_t v);
uint8_t f32_to_f8e4m3(float f);
constexpr float kF8E4M3Max = 448.0f;
uint16_t f32_to_f16(float f);

// Converts n elements between float dtypes (F32/F16/BF16; F8E4M3 as a source) on the host.
void convert_host(const void* src, DType src_t, void* dst, DType dst_t, size_t n);

}  // namespace gs
