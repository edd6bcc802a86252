// Mode resolution (docs/CUDA_GRAPHS.md §7): every requested mode x every support level x piecewise or not x q = 1 and q
// = 2.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cudagraph/mode_resolution.h"

namespace gs {
namespace {

using M = CUDAGraphMode;
using S = AttentionCGSupport;

constexpr S kSupports[4] = {S::NEVER, S::UNIFORM_SINGLE_TOKEN_DECODE, S::UNIFORM_BATCH, S::ALWAYS};

struct Row {
  M requested;
  bool piecewise;
  int q;
  M expected[4];  // by support: NEVER, UNIFORM_SINGLE_TOKEN_DECODE, UNIFORM_BATCH, ALWAYS
};

constexpr M N = M::NONE, P = M::PIECEWISE, F = M::FULL, FD = M::FULL_DECODE_ONLY, FP = M::FULL_AND_PIECEWISE;

const Row kTable[] = {
    {N, true, 1, {N, N, N, N}},     {N, true, 2, {N, N, N, N}},     {N, false, 1, {N, N, N, N}},
    {N, false, 2, {N, N, N, N}},    {P, true, 1, {P, P, P, P}},     {P, true, 2, {P, P, P, P}},
    {P, false, 1, {N, N, N, N}},    {P, false, 2, {N, N, N, N}},    {F, true, 1, {P, FP, FP, F}},
    {F, true, 2, {P, P, FP, F}},    {F, false, 1, {N, FD, FD, F}},  {F, false, 2, {N, N, FD, F}},
    {FD, true, 1, {P, FD, FD, FD}}, {FD, true, 2, {P, P, FD, FD}},  {FD, false, 1, {N, FD, FD, FD}},
    {FD, false, 2, {N, N, FD, FD}}, {FP, true, 1, {P, FP, FP, FP}}, {FP, true, 2, {P, P, FP, FP}},
    {FP, false, 1, {N, FD, FD, F}}, {FP, false, 2, {N, N, FD, F}},
};

TEST(ModeResolution, EveryModeSupportPiecewiseAndQueryLength) {
  int rows = 0;
  for (const Row& r : kTable) {
    for (int s = 0; s < 4; ++s) {
      SCOPED_TRACE(fmt::format("requested {} support {} piecewise {} q {}", mode_name(r.requested),
                               cg_support_name(kSupports[s]), r.piecewise, r.q));
      auto res = resolve_cudagraph_mode(r.requested, {"test-attn", kSupports[s]}, r.piecewise, r.q, {2, 4, 8});
      EXPECT_EQ(mode_name(res.mode), mode_name(r.expected[s]));
      EXPECT_EQ(res.warnings.empty(), res.mode == r.requested);
      ++rows;
    }
  }
  EXPECT_EQ(rows, 5 * 4 * 2 * 2);
}

TEST(ModeResolution, WarningsNameTheBackendItsSupportAndTheNewMode) {
  // FULL with NEVER: two changes (FULL -> FULL_AND_PIECEWISE -> PIECEWISE), one warning each.
  auto res = resolve_cudagraph_mode(M::FULL, {"flash-ish", S::NEVER}, true, 1, {1, 2});
  ASSERT_EQ(res.warnings.size(), 2u);
  for (const auto& w : res.warnings) {
    EXPECT_NE(w.find("flash-ish"), std::string::npos) << w;
    EXPECT_NE(w.find("NEVER"), std::string::npos) << w;
  }
  EXPECT_NE(res.warnings[0].find("-> FULL_AND_PIECEWISE"), std::string::npos) << res.warnings[0];
  EXPECT_NE(res.warnings[1].find("-> PIECEWISE"), std::string::npos) << res.warnings[1];
  EXPECT_TRUE(resolve_cudagraph_mode(M::FULL_AND_PIECEWISE, {"a", S::ALWAYS}, true, 1, {1}).warnings.empty());
}

TEST(ModeResolution, MinimumOverBackends) {
  EXPECT_EQ(min_cg_support({}).support, S::ALWAYS);
  auto m = min_cg_support({{"a", S::ALWAYS}, {"b", S::UNIFORM_BATCH}, {"c", S::ALWAYS}});
  EXPECT_EQ(m.backend, "b");
  EXPECT_EQ(m.support, S::UNIFORM_BATCH);
}

TEST(ModeResolution, DecodeSizesRoundToMultiplesOfTheQueryLength) {
  auto res = resolve_cudagraph_mode(M::FULL_AND_PIECEWISE, {"a", S::UNIFORM_BATCH}, true, 2, {1, 2, 4, 8, 16});
  EXPECT_EQ(res.capture_sizes, (std::vector<int>{2, 4, 8, 16}));
  res = resolve_cudagraph_mode(M::FULL_DECODE_ONLY, {"a", S::ALWAYS}, true, 4, {1, 3, 5, 8});
  EXPECT_EQ(res.capture_sizes, (std::vector<int>{4, 8}));
  // No separate decode graphs: sizes are kept (sorted, deduplicated).
  res = resolve_cudagraph_mode(M::FULL, {"a", S::ALWAYS}, true, 2, {8, 1, 3, 3});
  EXPECT_EQ(res.capture_sizes, (std::vector<int>{1, 3, 8}));
  res = resolve_cudagraph_mode(M::FULL_AND_PIECEWISE, {"a", S::ALWAYS}, true, 1, {1, 3});
  EXPECT_EQ(res.capture_sizes, (std::vector<int>{1, 3}));
}

}  // namespace
}  // namespace gs
