// StopStringMatcher: stop strings spanning pieces are found and never emitted, even in part.
#include <gtest/gtest.h>

#include "engine/stop_strings.h"

namespace gs {
namespace {

// Feeds pieces; returns (emitted text, stop string or "").
std::pair<std::string, std::string> stream(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopStringMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    auto r = m.feed(p);
    out += r.text;
    if (r.stop) return {out, *r.stop};
  }
  return {out + m.flush(), ""};
}

TEST(StopStrings, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.feed("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, FindsStopSpanningPiecesAndDropsIt) {
  auto [text, stop] = stream({"END"}, {"hello E", "N", "D tail"});
  EXPECT_EQ(text, "hello ");
  EXPECT_EQ(stop, "END");
}

TEST(StopStrings, HoldsBackPossiblePrefixes) {
  StopStringMatcher m({"\n\n", "STOP"});
  EXPECT_EQ(m.feed("one\n").text, "one");
  EXPECT_EQ(m.feed("two ST").text, "\ntwo ");
  auto r = m.feed("OX");
  EXPECT_EQ(r.text, "STOX");
  EXPECT_FALSE(r.stop);
  EXPECT_EQ(m.feed("S").text, "");
  EXPECT_EQ(m.flush(), "S");
}

TEST(StopStrings, EarliestMatchWins) {
  auto [text, stop] = stream({"cd", "b"}, {"abcd"});
  EXPECT_EQ(text, "a");
  EXPECT_EQ(stop, "b");
}

TEST(StopStrings, NoFalseStopOnPartialMatch) {
  auto [text, stop] = stream({"abc"}, {"ab", "ab", "x"});
  EXPECT_EQ(text, "ababx");
  EXPECT_EQ(stop, "");
}

}  // namespace
}  // namespace gs
