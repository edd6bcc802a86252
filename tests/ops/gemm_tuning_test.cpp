// The GEMM tuning cache file (ops/gemm_tuning.h): round trip, and every way a file must be refused
// (missing, corrupt, another key, malformed entries) without ever being trusted.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ops/gemm_tuning.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

class GemmTuningCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gs_gemm_tuning_{}_{}", ::getpid(), counter_++);
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static GemmTuningTable table() {
    GemmTuningTable t;
    t[{8, 3072, 2048, false, false}] = {{1, 2, 3, 4, 5, 6, 7, 0xffffffffffffffffull}, 12.5f};
    t[{256, 128256, 2048, false, true}] = {{9, 0, 0, 0, 0, 0, 0, 1}, 80.25f};
    return t;
  }
  std::string file(const std::string& key) const { return gemm_tuning_file(dir_.string(), key); }
  static void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }

  fs::path dir_;
  static inline int counter_ = 0;
};

TEST_F(GemmTuningCache, RoundTripKeepsEveryEntryExactly) {
  const std::string key = "gpu=NVIDIA H200 sm_90;driver=13000;dtype=bf16;gemms=8x3072x2048bb,";
  const std::string path = file(key);
  EXPECT_EQ(path, dir_.string() + "/gemm_tuning/" + gemm_tuning_key_hash(key) + ".json");
  ASSERT_TRUE(save_gemm_tuning(path, key, table()));
  const auto back = load_gemm_tuning(path, key);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, table());
  EXPECT_FALSE(fs::exists(path + fmt::format(".tmp{}", ::getpid())));  // renamed into place
}

TEST_F(GemmTuningCache, MissingFileIsAMiss) { EXPECT_FALSE(load_gemm_tuning(file("k"), "k").has_value()); }

TEST_F(GemmTuningCache, CorruptFileIsIgnored) {
  const std::string key = "k1";
  ASSERT_TRUE(save_gemm_tuning(file(key), key, table()));
  std::string text;
  {
    std::ifstream in(file(key));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  write(file(key), text.substr(0, text.size() / 2));  // truncated mid-write
  EXPECT_FALSE(load_gemm_tuning(file(key), key).has_value());
  write(file(key), "");
  EXPECT_FALSE(load_gemm_tuning(file(key), key).has_value());
  write(file(key), "[1, 2, 3]");
  EXPECT_FALSE(load_gemm_tuning(file(key), key).has_value());
}

TEST_F(GemmTuningCache, FileOfAnotherKeyIsStale) {
  // Same file name, another key (a new driver, a copied file): never trusted.
  ASSERT_TRUE(save_gemm_tuning(file("driver=12080"), "driver=12080", table()));
  EXPECT_FALSE(load_gemm_tuning(file("driver=12080"), "driver=13000").has_value());
  EXPECT_NE(gemm_tuning_key_hash("driver=12080"), gemm_tuning_key_hash("driver=13000"));
  EXPECT_EQ(gemm_tuning_key_hash("driver=12080"), gemm_tuning_key_hash("driver=12080"));
  EXPECT_EQ(gemm_tuning_key_hash("").size(), 16u);
}

TEST_F(GemmTuningCache, MalformedEntriesRejectTheWholeFile) {
  const std::string good_algo = R"(["0000000000000001","0","0","0","0","0","0","0"])";
  const std::string entries[] = {
      R"({"m": 0, "n": 8, "k": 8, "in_f32": false, "y_f32": false, "us": 1.0, "algo": )" + good_algo + "}",
      R"({"m": 8, "n": 8, "k": 8, "in_f32": 1, "y_f32": false, "us": 1.0, "algo": )" + good_algo + "}",
      R"({"m": 8, "n": 8, "k": 8, "in_f32": false, "y_f32": false, "us": 1.0, "algo": ["1"]})",
      R"({"m": 8, "n": 8, "k": 8, "in_f32": false, "y_f32": false, "us": 1.0,
          "algo": ["000000000000000g","0","0","0","0","0","0","0"]})",
      R"({"m": 8, "n": 8, "k": 8, "in_f32": false, "y_f32": false, "algo": )" + good_algo + "}",
  };
  for (const std::string& e : entries) {
    SCOPED_TRACE(e);
    write(file("k"), R"({"format": 1, "key": "k", "entries": [)" + e + "]}");
    EXPECT_FALSE(load_gemm_tuning(file("k"), "k").has_value());
  }
  write(file("k"), R"({"format": 2, "key": "k", "entries": []})");  // a future format
  EXPECT_FALSE(load_gemm_tuning(file("k"), "k").has_value());
  write(file("k"), R"({"format": 1, "key": "k", "entries": []})");
  EXPECT_TRUE(load_gemm_tuning(file("k"), "k").has_value());
}

TEST_F(GemmTuningCache, UnwritableDirectoryIsAWarningNotAnError) {
  write(dir_.string() + "/blocker", "a file where the cache directory should be");
  EXPECT_FALSE(save_gemm_tuning(dir_.string() + "/blocker/gemm_tuning/x.json", "k", table()));
}

TEST(GemmTuningCacheDir, FollowsXdgCacheHome) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(default_cache_dir(), "/tmp/xdg/graphserve");
  ::unsetenv("XDG_CACHE_HOME");
  if (const char* home = std::getenv("HOME"); home && *home) {
    EXPECT_EQ(default_cache_dir(), std::string(home) + "/.cache/graphserve");
  }
  if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace gs
