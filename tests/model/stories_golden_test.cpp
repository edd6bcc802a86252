// stories260K against the Hugging Face goldens: logits and 64 greedy tokens through the paged cache.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "golden.h"
#include "model_harness.h"
#include "test_paths.h"

namespace gs {
namespace {

using nlohmann::json;

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

ModelSource stories() {
  ModelSource s;
  s.dir = test::stories260k_dir().string();
  return s;
}

std::vector<std::string> prompt_names() {
  const json m = test::stories_golden("manifest");
  return m["prompts"].get<std::vector<std::string>>();
}

TEST(Stories260K, LastLogitsAndGreedyTokensMatchGoldens) {
  const auto names = prompt_names();
  ASSERT_EQ(names.size(), 8u);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const json g = test::stories_golden(name);
    test::ModelHarness h(stories());
    const auto ids = g["input_ids"].get<std::vector<int>>();
    auto logits = h.step({{0, ids}});
    EXPECT_LT(rel_l2(logits.back(), g["last_logits"].get<std::vector<float>>()), 1e-4);
    const auto want = g["greedy_output_ids"].get<std::vector<int>>();
    std::vector<int> got;
    int next = argmax(logits.back());
    for (size_t i = 0; i < want.size(); ++i) {
      got.push_back(next);
      if (i + 1 < want.size()) next = argmax(h.step({{0, {next}}}).back());
    }
    EXPECT_EQ(got, want);
  }
}

TEST(Stories260K, EveryPositionsLogitsMatchGolden) {
  const json g = test::stories_golden("full_logits_20");
  test::ModelHarness h(stories());
  const auto logits = h.step({{0, g["input_ids"].get<std::vector<int>>()}});
  const auto want = g["logits"].get<std::vector<std::vector<float>>>();
  ASSERT_EQ(logits.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(rel_l2(logits[i], want[i]), 1e-4) << "position " << i;
}

TEST(Stories260K, ChunkedPrefillMatchesOneShotPrefill) {
  const json g = test::stories_golden("full_logits_20");
  const auto ids = g["input_ids"].get<std::vector<int>>();
  test::ModelHarness whole(stories()), chunked(stories());
  const auto want = whole.step({{0, ids}});
  chunked.step({{0, {ids.begin(), ids.begin() + 7}}});
  const auto got = chunked.step({{0, {ids.begin() + 7, ids.end()}}});
  EXPECT_LT(rel_l2(got.back(), want.back()), 1e-5);
}

TEST(Stories260K, ABatchOfTwoRequestsMatchesEachAlone) {
  const auto a = test::stories_golden("long")["input_ids"].get<std::vector<int>>();
  const auto b = test::stories_golden("short")["input_ids"].get<std::vector<int>>();
  test::ModelHarness alone_a(stories()), alone_b(stories()), both(stories());
  const auto la = alone_a.step({{0, a}});
  const auto lb = alone_b.step({{0, b}});
  const auto lab = both.step({{0, a}, {1, b}});
  ASSERT_EQ(lab.size(), a.size() + b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(rel_l2(lab[i], la[i]), 1e-5) << "a " << i;
  for (size_t i = 0; i < b.size(); ++i) EXPECT_LT(rel_l2(lab[a.size() + i], lb[i]), 1e-5) << "b " << i;
  // And a mixed step: one decode token for a, one for b, in one forward.
  const auto da = alone_a.step({{0, {5}}}), db = alone_b.step({{0, {7}}});
  const auto dab = both.step({{1, {7}}, {0, {5}}});
  EXPECT_LT(rel_l2(dab[0], db[0]), 1e-5);
  EXPECT_LT(rel_l2(dab[1], da[0]), 1e-5);
}

}  // namespace
}  // namespace gs
