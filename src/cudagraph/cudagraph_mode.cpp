// Implements cudagraph/cudagraph_mode.h (CUDAGraphMode).
#include "cudagraph/cudagraph_mode.h"

#include <array>
#include <string>
#include <utility>

#include "core/error.h"

namespace gs {

namespace {
constexpr std::array<std::pair<CUDAGraphMode, std::string_view>, 5> kNames{{
    {CUDAGraphMode::NONE, "NONE"},
    {CUDAGraphMode::PIECEWISE, "PIECEWISE"},
    {CUDAGraphMode::FULL, "FULL"},
    {CUDAGraphMode::FULL_DECODE_ONLY, "FULL_DECODE_ONLY"},
    {CUDAGraphMode::FULL_AND_PIECEWISE, "FULL_AND_PIECEWISE"},
}};
}  // namespace

std::string_view mode_name(CUDAGraphMode m) {
  for (const auto& [mode, name] : kNames)
    if (mode == m) return name;
  return "?";
}

CUDAGraphMode parse_cudagraph_mode(std::string_view s) {
  for (const auto& [mode, name] : kNames)
    if (name == s) return mode;
  fail(
      "invalid cudagraph_mode '{}': valid modes (upper case) are NONE, PIECEWISE, FULL, "
      "FULL_DECODE_ONLY, FULL_AND_PIECEWISE",
      s);
}

// docs/CUDA_GRAPHS.md §4: each mode's member for mixed batches and for uniform decode batches.
CUDAGraphMode mixed_mode(CUDAGraphMode m) {
  switch (m) {
    case CUDAGraphMode::FULL_DECODE_ONLY: return CUDAGraphMode::NONE;
    case CUDAGraphMode::FULL_AND_PIECEWISE: return CUDAGraphMode::PIECEWISE;
    default: return m;
  }
}

CUDAGraphMode decode_mode(CUDAGraphMode m) {
  switch (m) {
    case CUDAGraphMode::FULL_DECODE_ONLY:
    case CUDAGraphMode::FULL_AND_PIECEWISE: return CUDAGraphMode::FULL;
    default: return m;
  }
}

bool separate_routine(CUDAGraphMode m) { return mixed_mode(m) != decode_mode(m); }

bool has_full_cudagraphs(CUDAGraphMode m) {
  return mixed_mode(m) == CUDAGraphMode::FULL || decode_mode(m) == CUDAGraphMode::FULL;
}

bool has_piecewise_cudagraphs(CUDAGraphMode m) {
  return mixed_mode(m) == CUDAGraphMode::PIECEWISE || decode_mode(m) == CUDAGraphMode::PIECEWISE;
}

}  // namespace gs
