// The built-in byte-level tokenizer, and the errors a broken tokenizer directory gives.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "test_paths.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

namespace fs = std::filesystem;

TEST(ByteLevelTokenizer, EncodesBytesAfterBos) {
  const Tokenizer tok = Tokenizer::byte_level(300);
  EXPECT_EQ(tok.size(), 300);
  EXPECT_EQ(tok.bos_id(), 256);
  EXPECT_EQ(tok.eos_id(), 257);
  EXPECT_EQ(tok.encode("hé"), (std::vector<int32_t>{256, 'h', 0xC3, 0xA9}));
  EXPECT_EQ(tok.encode("a b", false), (std::vector<int32_t>{'a', ' ', 'b'}));
  EXPECT_EQ(tok.encode("x</s>", false), (std::vector<int32_t>{'x', 257}));
  EXPECT_TRUE(tok.is_special(256));
  EXPECT_FALSE(tok.is_special('a'));
}

TEST(ByteLevelTokenizer, DecodesAndSkipsUnknownIds) {
  const Tokenizer tok = Tokenizer::byte_level(300);
  const std::string text = "tab\t\n 你好 🤖";
  EXPECT_EQ(tok.decode(tok.encode(text), true), text);
  EXPECT_EQ(tok.decode(tok.encode(text), false), "<s>" + text);
  // Dummy weights can produce any id below vocab_size; those decode to nothing.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{'o', 299, 'k', -1, 100000}), "ok");
  // A lone continuation byte decodes to U+FFFD rather than invalid UTF-8.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0x80}), "\xEF\xBF\xBD");
}

TEST(ByteLevelTokenizer, RejectsTooSmallVocab) { EXPECT_THROW(Tokenizer::byte_level(257), Error); }

TEST(Tokenizer, InvalidUtf8InputIsReplacedNotFatal) {
  const Tokenizer& tok = test::golden_tokenizer("qwen2.5-instruct");
  const auto ids = tok.encode("ok \xFF\xFE end", false);
  EXPECT_EQ(tok.decode(ids), "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
}

class BrokenDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("gs_tok_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  // Loading must fail with a gs::Error whose message names `file` and contains `what`.
  void expect_error(const std::string& file, const std::string& what) {
    try {
      Tokenizer::from_dir(dir_);
      FAIL() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find((dir_ / file).string()), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  }
  fs::path dir_;
};

TEST_F(BrokenDir, MissingDirectory) {
  fs::remove_all(dir_);
  try {
    Tokenizer::from_dir(dir_);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos);
  }
}

TEST_F(BrokenDir, MissingTokenizerJson) { expect_error("tokenizer.json", "cannot open"); }

TEST_F(BrokenDir, BadJson) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {)");
  expect_error("tokenizer.json", "invalid JSON");
}

TEST_F(BrokenDir, UnsupportedModelType) {
  write("tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  expect_error("tokenizer.json", "WordPiece");
}

TEST_F(BrokenDir, MergeWithUnknownToken) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  expect_error("tokenizer.json", "merge 0");
}

TEST_F(BrokenDir, WrongFieldType) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})");
  expect_error("tokenizer.json", "");
}

TEST_F(BrokenDir, BadTokenizerConfig) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  write("tokenizer_config.json", "{not json");
  expect_error("tokenizer_config.json", "invalid JSON");
}

TEST_F(BrokenDir, MinimalTokenizerWorks) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                              "merges": [["a", "b"]]}})");
  const Tokenizer tok = Tokenizer::from_dir(dir_);
  EXPECT_EQ(tok.encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(tok.size(), 3);
  EXPECT_FALSE(tok.bos_id().has_value());
  EXPECT_EQ(tok.chat_template(), "");
}

TEST_F(BrokenDir, SpecialTokensMapFillsMissingConfigEntries) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1, "</s>": 2},
                              "merges": []}})");
  write("tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": "{{ x }}"})");
  write("special_tokens_map.json", R"({"bos_token": "</s>", "eos_token": {"content": "</s>"}})");
  const Tokenizer tok = Tokenizer::from_dir(dir_);
  EXPECT_EQ(tok.bos_id(), 1);  // tokenizer_config.json wins
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.is_special(2));
  EXPECT_EQ(tok.chat_template(), "{{ x }}");
}

}  // namespace
}  // namespace gs
