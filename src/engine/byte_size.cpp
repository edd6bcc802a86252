// Implements engine/byte_size.h.
#include "engine/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "core/error.h"

namespace gs {

size_t parse_byte_size(std::string_view text, std::string_view what) {
  std::string s(text);
  auto bad = [&] { fail("{}: '{}' is not a byte size (examples: 536870912, 512MiB, 1.5GiB, 2G)", what, text); };
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) bad();
  double value = 0.0;
  try {
    size_t used = 0;
    value = std::stod(s.substr(0, i), &used);
    if (used != i) bad();
  } catch (const std::logic_error&) {
    bad();
  }
  std::string unit;
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] != ' ') unit += static_cast<char>(std::toupper(static_cast<unsigned char>(s[j])));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (!unit.empty() && unit.back() == 'I') unit.pop_back();
  double scale = 1.0;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    bad();
  double bytes = std::floor(value * scale);
  if (!(bytes >= 0.0 && bytes < 1.8e19)) bad();
  return static_cast<size_t>(bytes);
}

}  // namespace gs
