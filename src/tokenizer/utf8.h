// UTF-8 helpers for the tokenizer: code point iteration, lossy repair and character classes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gs::utf8 {

// Length in bytes of the valid UTF-8 character starting at s[i], or 0 when the bytes there are
// not a valid (shortest-form, non-surrogate) encoding.
size_t valid_char_len(std::string_view s, size_t i);

// Decodes the valid character at s[i] (see valid_char_len); returns U+FFFD for invalid bytes.
char32_t decode_at(std::string_view s, size_t i, size_t* len);

void append(std::string& out, char32_t cp);

// Replaces every maximal invalid subsequence with U+FFFD, like Rust's String::from_utf8_lossy
// (which tokenizers uses when decoding): valid input comes back unchanged.
std::string lossy(std::string_view bytes);

bool ends_with_replacement(std::string_view s);  // ends with U+FFFD

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_whitespace(char32_t cp);
// Letters, numbers or '_' (a "word" character for single_word added tokens).
bool is_word_char(char32_t cp);

}  // namespace gs::utf8
