// The stories260K tokenizer (SentencePiece-style BPE with byte fallback) against the model
// goldens, and the incremental detokenizer against whole-sequence decoding.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "golden.h"
#include "test_paths.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

using nlohmann::json;

const char* const kPrompts[] = {"bos_only", "short", "sentence", "long", "punctuation", "digits", "non_ascii", "emoji"};

const Tokenizer& stories() {
  static const Tokenizer tok = Tokenizer::from_dir(test::stories260k_dir());
  return tok;
}

const Tokenizer& llama3() { return test::golden_tokenizer("llama3-8b-instruct"); }

bool valid_utf8_without_replacement(const std::string& s) {
  // Every chunk the detokenizer emits must be complete UTF-8.
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return s.find("\xEF\xBF\xBD") == std::string::npos;
}

// Streams `output` after `prompt`; checks every chunk and returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& prompt, const std::vector<int32_t>& output,
                   bool skip_special) {
  std::string all;
  for (const std::string& chunk : test::stream_chunks(tok, prompt, output, skip_special)) {
    EXPECT_TRUE(valid_utf8_without_replacement(chunk)) << "chunk '" << chunk << "'";
    all += chunk;
  }
  return all;
}

using test::expected_suffix;

TEST(Stories260KTokenizer, EncodesEveryGoldenPrompt) {
  for (const char* name : kPrompts) {
    const json g = test::stories_golden(name);
    EXPECT_EQ(stories().encode(g.at("prompt").get<std::string>()), g.at("input_ids").get<std::vector<int32_t>>())
        << name;
  }
}

TEST(Stories260KTokenizer, DecodesEveryGoldenOutput) {
  for (const char* name : kPrompts) {
    const json g = test::stories_golden(name);
    const auto in = g.at("input_ids").get<std::vector<int32_t>>();
    const auto out = g.at("greedy_output_ids").get<std::vector<int32_t>>();
    EXPECT_EQ(stories().decode(out), g.at("output_text").get<std::string>()) << name;
    std::vector<int32_t> all = in;
    all.insert(all.end(), out.begin(), out.end());
    EXPECT_EQ(stories().decode(all, true), g.at("full_text").get<std::string>()) << name;
  }
}

// The stream is the full text minus the prompt's text. HF's output_text decodes the output
// alone and so loses one leading space; the stream keeps it when text precedes the output.
TEST(IncrementalDetokenizer, StreamsEveryStoriesGolden) {
  for (const char* name : kPrompts) {
    SCOPED_TRACE(name);
    const json g = test::stories_golden(name);
    const auto in = g.at("input_ids").get<std::vector<int32_t>>();
    const auto out = g.at("greedy_output_ids").get<std::vector<int32_t>>();
    const std::string text = stream(stories(), in, out, true);
    const std::string full = g.at("full_text");
    const std::string prompt_text = stories().decode(in, true);
    EXPECT_EQ(text, full.substr(prompt_text.size()));
    const std::string hf = g.at("output_text");
    EXPECT_TRUE(text == hf || text == " " + hf) << text;
  }
}

TEST(IncrementalDetokenizer, FirstTokenLeadingSpace) {
  const json bos_only = test::stories_golden("bos_only"), sentence = test::stories_golden("sentence");
  // Only <s> before the output: nothing to separate from, so no leading space (as HF).
  const std::string a = stream(stories(), {1}, bos_only.at("greedy_output_ids"), true);
  EXPECT_TRUE(a.starts_with("Once upon")) << a;
  // Text before the output: the first token keeps its space so prompt + output reads right.
  const std::string b = stream(stories(), sentence.at("input_ids"), sentence.at("greedy_output_ids"), true);
  EXPECT_TRUE(b.starts_with(" The cat was")) << b;
  // Not skipping specials: "<s>" is prompt text, so the space is kept after it.
  const std::string c = stream(stories(), {1}, bos_only.at("greedy_output_ids"), false);
  EXPECT_TRUE(c.starts_with(" Once upon")) << c;
}

// A run of <0xNN> tokens is held until a token that is not a byte ends it: HF decodes the run
// as a unit, so a later byte could still turn the characters so far into U+FFFD.
TEST(IncrementalDetokenizer, ByteFallbackRunIsHeldUntilItEnds) {
  const auto prompt = stories().encode("The dog");
  // "▁" then the two emoji's eight <0xNN> tokens (the vocabulary has no emoji), ...
  const auto out = stories().encode("😊🐶 and 🚀", false);
  ASSERT_GT(out.size(), 11u);
  IncrementalDetokenizer detok(stories(), prompt, true);
  EXPECT_EQ(detok.push(out[0]), " ");
  for (size_t i = 1; i <= 8; ++i) {
    ASSERT_TRUE(stories().id_to_token(out[i]).starts_with("<0x")) << i;
    EXPECT_EQ(detok.push(out[i]), "") << i;
  }
  ASSERT_FALSE(stories().id_to_token(out[9]).starts_with("<0x"));
  std::string all = " ";
  all += detok.push(out[9]);
  EXPECT_TRUE(all.starts_with(" 😊🐶")) << all;
  for (size_t i = 10; i < out.size(); ++i) {
    const std::string chunk = detok.push(out[i]);
    EXPECT_TRUE(valid_utf8_without_replacement(chunk)) << i;
    all += chunk;
  }
  all += detok.flush();
  EXPECT_EQ(all, " 😊🐶 and 🚀");
}

TEST(IncrementalDetokenizer, PromptEndingInsideByteRun) {
  // The initial window (last 5 prompt tokens) would start inside the emoji's byte run.
  // The output continues the run directly with the bytes of another emoji (no "▁" first).
  const auto prompt = stories().encode("Hi 😊😊");
  auto out = stories().encode("🐶 dog", false);
  ASSERT_EQ(stories().id_to_token(out[1]), "<0xF0>");
  out.erase(out.begin());
  EXPECT_EQ(stream(stories(), prompt, out, true), expected_suffix(stories(), prompt, out, true));
  EXPECT_EQ(stream(stories(), prompt, out, true), "🐶 dog");
}

TEST(IncrementalDetokenizer, ByteLevelMultiByteCharacters) {
  const auto prompt = llama3().encode("Say:");
  const std::string text = " 你好，世界！🤖🚀🔥 👨‍👩‍👧 done<|eot_id|>";
  const auto out = llama3().encode(text, false);
  for (const bool skip : {true, false}) {
    const std::string got = stream(llama3(), prompt, out, skip);
    EXPECT_EQ(got, expected_suffix(llama3(), prompt, out, skip));
  }
  EXPECT_EQ(stream(llama3(), prompt, out, false), text);
}

TEST(IncrementalDetokenizer, EmptyPromptAndEmptyOutput) {
  EXPECT_EQ(stream(stories(), {}, {}, true), "");
  const auto out = stories().encode("Once upon a time", false);
  EXPECT_EQ(stream(stories(), {}, out, true), "Once upon a time");
}

}  // namespace
}  // namespace gs
