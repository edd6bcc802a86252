// Where tests find ../shared (models and goldens), the source tree and the build outputs.
// The paths are compiled into test_paths.cpp alone, so no other test object depends on where the checkout lies
// (a fresh clone reuses ccache's objects).
#pragma once
#include <filesystem>

namespace gs::test {

std::filesystem::path shared_dir();  // $GRAPHSERVE_SHARED, else the shared/ folder beside the checkout
std::filesystem::path source_dir();  // the checkout
std::filesystem::path binary_dir();  // the build folder
inline std::filesystem::path stories260k_dir() { return shared_dir() / "models" / "stories260K"; }
inline std::filesystem::path golden_dir() { return shared_dir() / "golden"; }
inline std::filesystem::path graphserve_exe() { return binary_dir() / "graphserve"; }

}  // namespace gs::test
