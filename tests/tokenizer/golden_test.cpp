// Every case of the tokenizer goldens (../shared/golden/tokenizers/<name>.json, produced with
// transformers 5.17): ids with and without special tokens, decode, decode skipping specials.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

using nlohmann::json;

const char* const kFixtures[] = {
    "llama3-8b-instruct", "qwen2.5-instruct", "mistral-7b-instruct-v0.3", "phi-3-mini-instruct", "phi-2",
    "smollm-135m"};

std::filesystem::path golden_tokenizers() { return test::golden_dir() / "tokenizers"; }

json load_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  return json::parse(in);
}

const Tokenizer& fixture(const std::string& name) { return test::golden_tokenizer(name); }

class TokenizerGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerGolden, MetadataMatchesTransformers) {
  const json g = load_json(golden_tokenizers() / (std::string(GetParam()) + ".json"));
  const Tokenizer& tok = fixture(GetParam());
  const json& t = g.at("tokenizer");
  EXPECT_EQ(tok.size(), t.at("len").get<int>());
  if (t.at("bos_token_id").is_null()) {
    EXPECT_FALSE(tok.bos_id().has_value());
  } else {
    EXPECT_EQ(tok.bos_id(), t.at("bos_token_id").get<int32_t>());
    EXPECT_EQ(tok.bos_token(), t.at("bos_token").get<std::string>());
  }
  EXPECT_EQ(tok.eos_id(), t.at("eos_token_id").get<int32_t>());
  EXPECT_EQ(tok.eos_token(), t.at("eos_token").get<std::string>());
  for (int32_t id : t.at("all_special_ids")) EXPECT_TRUE(tok.is_special(id)) << id;
}

TEST_P(TokenizerGolden, EveryCaseMatches) {
  const json g = load_json(golden_tokenizers() / (std::string(GetParam()) + ".json"));
  const Tokenizer& tok = fixture(GetParam());
  int checked = 0;
  for (const json& c : g.at("cases")) {
    const std::string text = c.at("text");
    SCOPED_TRACE(c.at("id").get<std::string>());
    for (const bool special : {true, false}) {
      const json& want = c.at(special ? "with_special" : "without_special");
      const auto ids = tok.encode(text, special);
      EXPECT_EQ(ids, want.at("ids").get<std::vector<int32_t>>()) << "add_special=" << special;
      const auto want_ids = want.at("ids").get<std::vector<int32_t>>();
      EXPECT_EQ(tok.decode(want_ids, false), want.at("decode").get<std::string>());
      EXPECT_EQ(tok.decode(want_ids, true), want.at("decode_skip_special").get<std::string>());
      const auto tokens = want.at("tokens").get<std::vector<std::string>>();
      for (size_t i = 0; i < want_ids.size(); ++i) {
        EXPECT_EQ(tok.id_to_token(want_ids[i]), tokens[i]);
        EXPECT_EQ(tok.token_to_id(tokens[i]), want_ids[i]);
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 33);
}

// encode with a token limit: a text that fits gives exactly the goldens' ids; one that does not
// stops a few tokens past the limit with the text's first tokens, whether the limit falls on a
// short text (split whole) or on a long one (split in prefixes, the rest never split).
TEST_P(TokenizerGolden, EncodeStopsPastATokenLimit) {
  const json g = load_json(golden_tokenizers() / (std::string(GetParam()) + ".json"));
  const Tokenizer& tok = fixture(GetParam());
  auto expect_stopped = [](const std::vector<int32_t>& got, const std::vector<int32_t>& full, size_t limit) {
    EXPECT_GT(got.size(), limit);
    EXPECT_LE(got.size(), limit + 256) << "encoding went on past the limit";
    ASSERT_LE(got.size(), full.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), full.begin())) << "not the text's first tokens";
  };
  std::string long_text;
  for (const json& c : g.at("cases")) {
    const std::string text = c.at("text");
    long_text += text + "\n";
    SCOPED_TRACE(c.at("id").get<std::string>());
    for (const bool special : {true, false}) {
      const auto want = c.at(special ? "with_special" : "without_special").at("ids").get<std::vector<int32_t>>();
      EXPECT_EQ(tok.encode(text, special, want.size()), want);
      EXPECT_EQ(tok.encode(text, special, SIZE_MAX), want);
      if (want.size() > 1 && text.size() > 0) {
        const auto cut = tok.encode(text, special, want.size() - 2);
        EXPECT_GT(cut.size(), want.size() - 2);
        EXPECT_TRUE(std::equal(cut.begin(), cut.end(), want.begin()));
      }
    }
  }
  while (long_text.size() < (size_t(600) << 10)) long_text += long_text;
  const auto full = tok.encode(long_text, false);
  for (const size_t limit : {size_t(1000), size_t(20000), full.size() - 1}) {
    SCOPED_TRACE(limit);
    expect_stopped(tok.encode(long_text, false, limit), full, limit);
  }
  EXPECT_EQ(tok.encode(long_text, false, full.size()), full);
  EXPECT_EQ(tok.encode(long_text, true, full.size() + 8), tok.encode(long_text, true));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerGolden, ::testing::ValuesIn(kFixtures), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(TokenizerConfig, ChatTemplateIsExposed) {
  EXPECT_NE(fixture("llama3-8b-instruct").chat_template().find("start_header_id"), std::string::npos);
  EXPECT_NE(fixture("qwen2.5-instruct").chat_template().find("im_start"), std::string::npos);
  EXPECT_EQ(fixture("phi-2").chat_template(), "");
}

}  // namespace
}  // namespace gs
