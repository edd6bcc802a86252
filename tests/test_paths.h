// Where tests find ../shared (models and goldens) and the build outputs.
#pragma once
#include <cstdlib>
#include <filesystem>

namespace gs::test {

// $GRAPHSERVE_SHARED, else the shared/ folder beside the checkout.
inline std::filesystem::path shared_dir() {
  if (const char* p = std::getenv("GRAPHSERVE_SHARED")) return p;
  return GS_SHARED_DIR;
}
inline std::filesystem::path stories260k_dir() { return shared_dir() / "models" / "stories260K"; }
inline std::filesystem::path golden_dir() { return shared_dir() / "golden"; }
inline std::filesystem::path binary_dir() { return GS_BINARY_DIR; }
inline std::filesystem::path graphserve_exe() { return binary_dir() / "graphserve"; }

}  // namespace gs::test
