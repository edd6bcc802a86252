// Implements core/dtype.h (DType).
#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace gs {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
  }
  return "?";
}

DType parse_dtype(std::string_view n) {
  if (n == "f32" || n == "float32" || n == "float" || n == "F32") return DType::F32;
  if (n == "f16" || n == "float16" || n == "half" || n == "F16") return DType::F16;
  if (n == "bf16" || n == "bfloat16" || n == "BF16") return DType::BF16;
  if (n == "i32" || n == "int32" || n == "I32") return DType::I32;
  if (n == "i64" || n == "int64" || n == "I64") return DType::I64;
  if (n == "u8" || n == "uint8" || n == "U8") return DType::U8;
  fail("unknown dtype '{}' (valid: float32, float16, bfloat16)", n);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (absx >= 0x477ff000u) return sign | 0x7c00;  // overflow -> inf
  if (absx < 0x38800000u) {                       // subnormal or zero
    const float a = std::fabs(f);
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));  // a / 2^-24
  }
  uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u);  // round to nearest even at bit 13
  return sign | uint16_t((r - 0x38000000u) >> 13);
}

namespace {
float load(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: fail("convert_host: {} is not a float dtype", dtype_name(t));
  }
}
void store(void* p, DType t, size_t i, float v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = v; return;
    case DType::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    case DType::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    default: fail("convert_host: {} is not a float dtype", dtype_name(t));
  }
}
}  // namespace

void convert_host(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  for (size_t i = 0; i < n; ++i) store(dst, dt, i, load(src, st, i));
}

}  // namespace gs
