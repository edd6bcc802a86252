// UTF-8 helpers for the template engine: Python's str counts, slices and strips code points.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gs::jinja {

// Byte offsets of each code point start in `s`, plus s.size() at the end (size = count + 1).
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);

// Python's str.isspace() for the code point starting at s[i]; sets `len` to its byte length.
bool is_space_at(std::string_view s, size_t i, size_t& len);

// Python's str.strip()/lstrip()/rstrip() with no argument (Unicode whitespace) or with a set of
// characters (each code point of `chars`).
std::string strip(std::string_view s, bool left, bool right);
std::string strip_chars(std::string_view s, std::string_view chars, bool left, bool right);

// Appends code point `cp` to `out` as UTF-8.
void append_utf8(std::string& out, char32_t cp);
// Decodes the code point at s[i] (invalid bytes decode as themselves, length 1).
char32_t decode_at(std::string_view s, size_t i, size_t& len);

}  // namespace gs::jinja
