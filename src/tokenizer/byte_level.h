// GPT-2's reversible byte <-> printable character mapping used by byte-level BPE
// (space is "Ġ", newline "Ċ", bytes 0x21..0x7E map to themselves).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace gs {

// Each byte of `bytes` becomes its mapped character (UTF-8).
std::string bytes_to_chars(std::string_view bytes);

// The byte a mapped character stands for; nullopt for characters outside the mapping.
std::optional<unsigned char> char_to_byte(char32_t cp);

}  // namespace gs
