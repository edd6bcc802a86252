// The build's paths, given by tests/CMakeLists.txt to this file only.
#include "test_paths.h"

#include <cstdlib>

namespace gs::test {

std::filesystem::path shared_dir() {
  if (const char* p = std::getenv("GRAPHSERVE_SHARED")) return p;
  return GS_SHARED_DIR;
}
std::filesystem::path source_dir() { return GS_SOURCE_DIR; }
std::filesystem::path binary_dir() { return GS_BINARY_DIR; }

}  // namespace gs::test
