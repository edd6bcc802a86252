// Implements tokenizer/jinja/utf8.h.
#include "tokenizer/jinja/utf8.h"

#include "tokenizer/utf8.h"

namespace gs::jinja {

char32_t decode_at(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    len = 1;
    return b;
  }
  char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) {
      len = 1;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  len = n;
  return cp;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    decode_at(s, i, len);
    out.push_back(i);
  }
  out.push_back(s.size());
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len, ++n) decode_at(s, i, len);
  return n;
}

static bool is_space_cp(char32_t c) {
  // Python's str.isspace(): bidirectional class WS/B/S or category Zs.
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_space_at(std::string_view s, size_t i, size_t& len) { return is_space_cp(decode_at(s, i, len)); }

template <typename Pred>
static std::string strip_if(std::string_view s, bool left, bool right, Pred pred) {
  const auto offs = code_point_offsets(s);
  size_t b = 0, e = offs.size() - 1;  // code point range [b, e)
  size_t len = 0;
  while (left && b < e && pred(decode_at(s, offs[b], len))) ++b;
  while (right && e > b && pred(decode_at(s, offs[e - 1], len))) --e;
  return std::string(s.substr(offs[b], offs[e] - offs[b]));
}

std::string strip(std::string_view s, bool left, bool right) { return strip_if(s, left, right, is_space_cp); }

std::string strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  std::vector<char32_t> set;
  for (size_t i = 0, len = 0; i < chars.size(); i += len) set.push_back(decode_at(chars, i, len));
  return strip_if(s, left, right, [&](char32_t c) {
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  });
}

void append_utf8(std::string& out, char32_t cp) { utf8::append(out, cp); }

}  // namespace gs::jinja
