// Implements core/dtype.h (DType).
#include "core/dtype.h"

#include <algorithm>
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
    case DType::F8E4M3: return 1;
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
    case DType::F8E4M3: return "f8e4m3";
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
  if (n == "f8e4m3" || n == "float8_e4m3fn" || n == "F8_E4M3") return DType::F8E4M3;
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

float f8e4m3_to_f32(uint8_t v) {
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xf, mant = v & 0x7;
  if (exp == 0xf && mant == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(float(mant), -9);  // subnormal: mant / 8 * 2^-6
  return sign * std::ldexp(float(8 + mant), exp - 10);      // (1 + mant / 8) * 2^(exp - 7)
}

uint8_t f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::min(std::fabs(f), kF8E4M3Max);
  if (a < std::ldexp(1.0f, -6)) return sign | uint8_t(std::nearbyint(a * 512.0f));  // subnormals (8 may carry)
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): the significand's unit is 2^(e - 4)
  const float q = std::nearbyint(std::ldexp(a, 4 - e));  // in [8, 16]
  const int exp = e - 1 + 7 + (q == 16.0f ? 1 : 0);
  const int mant = q == 16.0f ? 0 : int(q) - 8;
  return sign | uint8_t(exp << 3) | uint8_t(mant);
}

namespace {
float load(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F8E4M3: return f8e4m3_to_f32(static_cast<const uint8_t*>(p)[i]);
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
