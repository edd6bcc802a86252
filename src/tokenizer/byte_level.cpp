// Implements tokenizer/byte_level.h.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace gs {

namespace {

// bytes_to_unicode() from GPT-2: printable Latin-1 bytes keep their code point, the other 68
// bytes take 256, 257, ... in order.
constexpr std::array<char32_t, 256> make_table() {
  std::array<char32_t, 256> t{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    t[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return t;
}
constexpr std::array<char32_t, 256> kByteToChar = make_table();

// The inverse: code points 0..323 to their byte, -1 where unmapped.
constexpr std::array<int, 324> make_inverse() {
  std::array<int, 324> t{};
  for (auto& v : t) v = -1;
  for (int b = 0; b < 256; ++b) t[kByteToChar[b]] = b;
  return t;
}
constexpr std::array<int, 324> kCharToByte = make_inverse();

}  // namespace

std::string bytes_to_chars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8::append(out, kByteToChar[b]);
  return out;
}

std::optional<unsigned char> char_to_byte(char32_t cp) {
  if (cp >= kCharToByte.size() || kCharToByte[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(kCharToByte[cp]);
}

}  // namespace gs
