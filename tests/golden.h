// The goldens under ../shared/golden (test_paths.h) as JSON, with an error that names a missing
// file instead of a parse error at its first byte.
#pragma once
#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>
#include <string>

#include "test_paths.h"

namespace gs::test {

// golden_dir() / rel, parsed.
inline nlohmann::json read_golden(const std::filesystem::path& rel) {
  const std::filesystem::path path = golden_dir() / rel;
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("missing golden file " + path.string() +
                             ": the tests read shared/golden beside the checkout or in $GRAPHSERVE_SHARED "
                             "(tools/gpu/pack.sh packs it with GS_GPU_GOLDEN=1)");
  return nlohmann::json::parse(in);
}

// A stories260K golden (../shared/golden/stories260K/<name>.json).
inline nlohmann::json stories_golden(const std::string& name) {
  return read_golden(std::filesystem::path("stories260K") / (name + ".json"));
}

}  // namespace gs::test
