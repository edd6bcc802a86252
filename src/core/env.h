// Reading the operational environment variables (the ones a deployment sets: docs/ENVIRONMENT.md
// lists every variable graphserve reads, with its meaning). Kernel variants are never chosen here:
// they are typed options (ops/kernel_options.h).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gs {

// $name's value, or nullptr when it is unset.
inline const char* env_value(const char* name) { return std::getenv(name); }

// Whether $name is set to exactly `value` ("0" turns a default-on setting off, "1" a default-off
// one on).
inline bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::strcmp(e, value) == 0;
}

// $name as an integer clamped to [lo, hi]; `fallback` when it is unset or not a positive integer.
inline int env_int(const char* name, int lo, int hi, int fallback) {
  const char* e = std::getenv(name);
  const int v = e != nullptr ? std::atoi(e) : 0;
  return v > 0 ? std::clamp(v, lo, hi) : fallback;
}

}  // namespace gs
