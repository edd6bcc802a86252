// CUDAGraphMode names and parsing, CompilationConfig flags, capture sizes and mode resolution.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cudagraph/capture_sizes.h"
#include "cudagraph/compilation_config.h"
#include "cudagraph/cudagraph_mode.h"

namespace gs {
namespace {

using M = CUDAGraphMode;

TEST(CUDAGraphMode, ParsesAndPrintsUpperCase) {
  for (M m : {M::NONE, M::PIECEWISE, M::FULL, M::FULL_DECODE_ONLY, M::FULL_AND_PIECEWISE})
    EXPECT_EQ(parse_cudagraph_mode(mode_name(m)), m);
  EXPECT_EQ(mode_name(M::FULL_AND_PIECEWISE), "FULL_AND_PIECEWISE");
  try {
    parse_cudagraph_mode("full");
    FAIL() << "lower case must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'full'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("FULL_DECODE_ONLY"), std::string::npos);
  }
}

// The member table of docs/CUDA_GRAPHS.md §2.
TEST(CUDAGraphMode, MembersFollowTheSpecTable) {
  struct Row {
    M mode, mixed, decode;
    bool separate;
  };
  const Row rows[] = {
      {M::NONE, M::NONE, M::NONE, false},
      {M::PIECEWISE, M::PIECEWISE, M::PIECEWISE, false},
      {M::FULL, M::FULL, M::FULL, false},
      {M::FULL_DECODE_ONLY, M::NONE, M::FULL, true},
      {M::FULL_AND_PIECEWISE, M::PIECEWISE, M::FULL, true},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(mode_name(r.mode));
    EXPECT_EQ(mixed_mode(r.mode), r.mixed);
    EXPECT_EQ(decode_mode(r.mode), r.decode);
    EXPECT_EQ(separate_routine(r.mode), r.separate);
  }
  EXPECT_FALSE(has_full_cudagraphs(M::PIECEWISE));
  EXPECT_TRUE(has_full_cudagraphs(M::FULL_DECODE_ONLY));
  EXPECT_TRUE(has_piecewise_cudagraphs(M::FULL_AND_PIECEWISE));
  EXPECT_FALSE(has_piecewise_cudagraphs(M::FULL_DECODE_ONLY));
  EXPECT_FALSE(has_piecewise_cudagraphs(M::NONE));
}

TEST(CompilationConfig, AppliesJson) {
  CompilationConfig c;
  EXPECT_FALSE(c.cudagraph_mode.has_value());  // the device decides
  EXPECT_EQ(c.mode_for(/*on_gpu=*/true, false), M::FULL_AND_PIECEWISE);
  EXPECT_EQ(c.mode_for(/*on_gpu=*/false, false), M::NONE);
  c.apply_json(R"({"cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4],
                   "max_cudagraph_capture_size": 4, "compile_sizes": [8]})");
  EXPECT_EQ(c.cudagraph_mode, M::PIECEWISE);
  EXPECT_EQ(c.cudagraph_capture_sizes, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(c.max_cudagraph_capture_size, 4);
  EXPECT_EQ(c.compile_sizes, (std::vector<int>{8}));
}

TEST(CompilationConfig, AppliesDotSettings) {
  CompilationConfig c;
  c.apply_setting("cudagraph_mode", "FULL");
  EXPECT_EQ(c.cudagraph_mode, M::FULL);
  c.apply_setting("cudagraph_mode", "\"NONE\"");
  EXPECT_EQ(c.cudagraph_mode, M::NONE);
  c.apply_setting("cudagraph_capture_sizes", "[8,1]");
  EXPECT_EQ(c.cudagraph_capture_sizes, (std::vector<int>{8, 1}));
  c.apply_setting("max_cudagraph_capture_size", "16");
  EXPECT_EQ(c.max_cudagraph_capture_size, 16);
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected gs::Error";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
  }
}

TEST(CompilationConfig, BadInputIsAnErrorThatListsTheValidOnes) {
  CompilationConfig c;
  expect_error([&] { c.apply_json(R"({"cudagraph_modes": "FULL"})"); },
               {"cudagraph_modes", "cudagraph_capture_sizes", "max_cudagraph_capture_size", "compile_sizes"});
  expect_error([&] { c.apply_setting("bogus", "1"); }, {"bogus", "cudagraph_mode"});
  expect_error([&] { c.apply_setting("bogus", "x y"); }, {"bogus", "valid keys"});
  expect_error([&] { c.apply_json(R"({"cudagraph_mode": "full"})"); }, {"full", "FULL_AND_PIECEWISE"});
  expect_error([&] { c.apply_json(R"({"cudagraph_mode": 3})"); }, {"cudagraph_mode"});
  expect_error([&] { c.apply_json(R"({"cudagraph_capture_sizes": [1, 0]})"); }, {"cudagraph_capture_sizes"});
  expect_error([&] { c.apply_json(R"({"cudagraph_capture_sizes": 4})"); }, {"list"});
  expect_error([&] { c.apply_json(R"({"max_cudagraph_capture_size": -1})"); }, {"max_cudagraph_capture_size"});
  expect_error([&] { c.apply_setting("compile_sizes", "[1.5]"); }, {"compile_sizes"});
  expect_error([&] { c.apply_json("{not json"); }, {"not valid JSON"});
  expect_error([&] { c.apply_json("[1]"); }, {"JSON object"});
  // A failed apply_json changes nothing.
  EXPECT_THROW(c.apply_json(R"({"cudagraph_mode": "NONE", "x": 1})"), Error);
  EXPECT_FALSE(c.cudagraph_mode.has_value());
}

TEST(CaptureSizes, DefaultsAre124ThenStepsOf8) {
  EXPECT_EQ(default_capture_sizes(32), (std::vector<int>{1, 2, 4, 8, 16, 24, 32}));
  EXPECT_EQ(default_capture_sizes(3), (std::vector<int>{1, 2}));
  CompilationConfig c;
  // max = min(max_num_seqs * 2, 256)
  auto s = resolve_capture_sizes(c, 256, 8192);
  EXPECT_EQ(s.back(), 256);
  EXPECT_EQ(s.size(), 3u + 32u);
  EXPECT_EQ(resolve_capture_sizes(c, 8, 8192).back(), 16);
  // Never above max_num_batched_tokens.
  EXPECT_EQ(resolve_capture_sizes(c, 256, 100).back(), 96);
  c.max_cudagraph_capture_size = 24;
  EXPECT_EQ(resolve_capture_sizes(c, 256, 8192), (std::vector<int>{1, 2, 4, 8, 16, 24}));
  c.cudagraph_capture_sizes = {16, 4, 4, 64};
  EXPECT_EQ(resolve_capture_sizes(c, 256, 8192), (std::vector<int>{4, 16}));
  c.max_cudagraph_capture_size = 0;
  EXPECT_EQ(resolve_capture_sizes(c, 256, 32), (std::vector<int>{4, 16}));
  c.cudagraph_mode = M::NONE;
  EXPECT_TRUE(resolve_capture_sizes(c, 256, 8192).empty());
}

}  // namespace
}  // namespace gs
