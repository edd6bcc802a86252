// Developer A/B switches read from the environment: the GS_... timing knobs, each documented where
// it is used and measured in tools/gpu/NOTES.md. Callers read their switch once (into a static).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gs {

// Whether $name is set to exactly `value` ("0" turns a default-on switch off, "1" a default-off
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
