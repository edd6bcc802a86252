// The GEMM-tuning keys of CompilationConfig (docs/CUDA_GRAPHS.md §9): compile_sizes, cache_dir,
// disable_compile_cache, as JSON and as -cc settings, and their errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cudagraph/compilation_config.h"

namespace gs {
namespace {

TEST(CompileCacheConfig, DefaultsTuneTheCaptureSizesWithTheDefaultCache) {
  const CompilationConfig c;
  EXPECT_TRUE(c.compile_sizes.empty());
  EXPECT_TRUE(c.cache_dir.empty());
  EXPECT_FALSE(c.disable_compile_cache);
}

TEST(CompileCacheConfig, JsonAndSettings) {
  CompilationConfig c;
  c.apply_json(R"({"compile_sizes": [16, 64], "cache_dir": "/tmp/gs cache", "disable_compile_cache": true})");
  EXPECT_EQ(c.compile_sizes, (std::vector<int>{16, 64}));
  EXPECT_EQ(c.cache_dir, "/tmp/gs cache");
  EXPECT_TRUE(c.disable_compile_cache);
  c.apply_setting("disable_compile_cache", "false");
  c.apply_setting("cache_dir", "/var/cache/gs");  // a bare string, as -cc.cache_dir=/var/cache/gs
  EXPECT_FALSE(c.disable_compile_cache);
  EXPECT_EQ(c.cache_dir, "/var/cache/gs");
}

TEST(CompileCacheConfig, BadValuesNameTheKey) {
  CompilationConfig c;
  auto message = [&](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { c.apply_setting("disable_compile_cache", "yes"); }).find("disable_compile_cache"),
            std::string::npos);
  EXPECT_NE(message([&] { c.apply_json(R"({"cache_dir": 3})"); }).find("cache_dir"), std::string::npos);
  EXPECT_NE(message([&] { c.apply_json(R"({"compile_size": [8]})"); }).find("disable_compile_cache"),
            std::string::npos);  // the list of valid keys names the new ones
  EXPECT_FALSE(c.disable_compile_cache);
  EXPECT_TRUE(c.cache_dir.empty());
}

}  // namespace
}  // namespace gs
