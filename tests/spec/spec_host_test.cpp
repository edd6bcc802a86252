// The host side of speculative decoding: --speculative-config parsing (vLLM's keys, errors that
// list the valid values), the n-gram prompt-lookup proposer and the verification rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "spec/ngram_proposer.h"
#include "spec/speculative_config.h"
#include "spec/verification.h"

namespace gs {
namespace {

std::string error_of(const std::string& json) {
  try {
    SpeculativeConfig::parse(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpeculativeConfig, ParsesVllmKeysAndDefaults) {
  auto c = SpeculativeConfig::parse(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2})");
  EXPECT_EQ(c.method, "ngram");
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.uniform_query_len(), 5);
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2})");
  EXPECT_EQ(c.prompt_lookup_max, 5);  // vLLM's defaults
  EXPECT_EQ(c.prompt_lookup_min, 5);
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 3);
  c = SpeculativeConfig::parse(R"({"method": "draft_model", "model": "llama3.2-1b", "num_speculative_tokens": 4})");
  EXPECT_EQ(c.model, "llama3.2-1b");
  EXPECT_FALSE(SpeculativeConfig::parse("").enabled());
  EXPECT_FALSE(SpeculativeConfig::parse("{}").enabled());
  EXPECT_EQ(SpeculativeConfig{}.uniform_query_len(), 1);
}

TEST(SpeculativeConfig, BadValuesListTheValidOnes) {
  EXPECT_NE(error_of(R"({"method": "eagle", "num_speculative_tokens": 2})").find("ngram, draft_model"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "lookahead": 3})")
                .find("method, num_speculative_tokens, prompt_lookup_max, prompt_lookup_min, model"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 0})").find("[1, 32]"), std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram"})").find("num_speculative_tokens"), std::string::npos);
  EXPECT_NE(error_of(R"({"num_speculative_tokens": 3})").find("needs 'method'"), std::string::npos);
  EXPECT_NE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 2,
                         "prompt_lookup_min": 3})")
                .find("prompt_lookup_min <= prompt_lookup_max"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "draft_model", "num_speculative_tokens": 2})").find("needs 'model'"),
            std::string::npos);
  EXPECT_NE(error_of("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("JSON object"), std::string::npos);
}

TEST(NgramProposer, MostRecentLongestMatch) {
  const NgramProposer p(2, 3);
  // Suffix (7, 8, 9) occurs at 1; the 3-gram wins over the more recent 2-gram (8, 9) at 6.
  EXPECT_EQ(p.propose(std::vector<int32_t>{1, 7, 8, 9, 4, 5, 8, 9, 6, 7, 8, 9}, 3), (std::vector<int32_t>{4, 5, 8}));
  // Only the 2-gram (8, 9) matches: its most recent occurrence is followed by 6, 1.
  EXPECT_EQ(p.propose(std::vector<int32_t>{8, 9, 3, 8, 9, 6, 1, 8, 9}, 2), (std::vector<int32_t>{6, 1}));
  // No suffix of 2 or 3 tokens occurs earlier (a 1-gram would).
  EXPECT_TRUE(p.propose(std::vector<int32_t>{1, 2, 3, 4, 2}, 3).empty());
  EXPECT_TRUE(p.propose(std::vector<int32_t>{5, 5}, 3).empty());  // too short for an earlier 2-gram
  EXPECT_TRUE(p.propose(std::vector<int32_t>{1, 2, 1, 2}, 0).empty());
}

TEST(NgramProposer, ContinuationRepeatsWithThePeriod) {
  const NgramProposer p(2, 2);
  // Period 3: the match at 3 is followed by 3 known tokens, then the proposal continues itself.
  EXPECT_EQ(p.propose(std::vector<int32_t>{1, 2, 3, 1, 2, 3, 1, 2}, 7), (std::vector<int32_t>{3, 1, 2, 3, 1, 2, 3}));
  // A run of one token.
  EXPECT_EQ(p.propose(std::vector<int32_t>{4, 9, 9, 9}, 4), (std::vector<int32_t>{9, 9, 9, 9}));
}

TEST(Verification, AcceptsUpToTheFirstMismatch) {
  EXPECT_EQ(num_accepted_tokens(std::vector<int32_t>{5}, std::vector<int32_t>{}), 0);
  EXPECT_EQ(num_accepted_tokens(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2}), 2);  // all + bonus
  EXPECT_EQ(num_accepted_tokens(std::vector<int32_t>{1, 7, 3}, std::vector<int32_t>{1, 2}), 1);
  EXPECT_EQ(num_accepted_tokens(std::vector<int32_t>{4, 2, 3}, std::vector<int32_t>{1, 2}), 0);  // later match ignored
  EXPECT_THROW(num_accepted_tokens(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2}), Error);
}

}  // namespace
}  // namespace gs
