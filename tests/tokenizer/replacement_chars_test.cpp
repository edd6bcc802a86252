// U+FFFD where decoded bytes are not UTF-8, as Hugging Face's tokenizers put it, whole and
// streamed. It depends on the decoder:
//  - ByteFallback (SentencePiece <0xNN> tokens; stories260K): a run of byte tokens that is not
//    valid UTF-8 gives one U+FFFD per byte (decoders/byte_fallback.rs), so <0xE4><0x0A> is
//    "\ufffd\ufffd";
//  - ByteLevel (GPT-2 style; Qwen2.5): all bytes through String::from_utf8_lossy, one U+FFFD
//    per maximal invalid subpart, valid bytes kept, so E4 0A is "\ufffd\n".
// The incremental detokenizer (streamed and non-streamed completion text) must give exactly
// decode(prompt + output) minus decode(prompt) on any sequence of byte and word tokens.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>

#include "test_paths.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/fixtures.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace gs {
namespace {

const std::string kR = "\xEF\xBF\xBD";  // U+FFFD

const Tokenizer& stories() {
  static const Tokenizer tok = Tokenizer::from_dir(test::stories260k_dir());
  return tok;
}
const Tokenizer& qwen() { return test::golden_tokenizer("qwen2.5-instruct"); }

// The id of the token for byte b: <0xNN> (byte fallback) or its byte-level character.
int32_t byte_id(const Tokenizer& tok, unsigned char b, bool byte_level) {
  const std::string t = byte_level ? bytes_to_chars(std::string(1, char(b))) : fmt::format("<0x{:02X}>", b);
  const auto id = tok.token_to_id(t);
  EXPECT_TRUE(id.has_value()) << t;
  return id.value_or(0);
}

std::vector<int32_t> bytes(const Tokenizer& tok, std::initializer_list<unsigned char> bs, bool byte_level) {
  std::vector<int32_t> ids;
  for (unsigned char b : bs) ids.push_back(byte_id(tok, b, byte_level));
  return ids;
}

TEST(ReplacementChars, ByteFallbackGivesOneReplacementPerByteOfAnInvalidRun) {
  const Tokenizer& tok = stories();
  ASSERT_EQ(tok.id_to_token(231), "<0xE4>");
  ASSERT_EQ(tok.id_to_token(13), "<0x0A>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{231, 13}), kR + kR);
  EXPECT_EQ(tok.decode(bytes(tok, {0xE4, 0xB8, 0xAD}, false)), "中");
  EXPECT_EQ(tok.decode(bytes(tok, {0xE4, 0xB8, 0xAD, 0xE4}, false)), kR + kR + kR + kR);  // the run is one unit
  auto ids = bytes(tok, {0xE4, 0x0A}, false);
  ids.push_back(*tok.token_to_id("▁the"));
  EXPECT_EQ(tok.decode(ids), kR + kR + " the");
}

TEST(ReplacementChars, ByteLevelGivesOneReplacementPerInvalidSequence) {
  const Tokenizer& tok = qwen();
  EXPECT_EQ(tok.decode(bytes(tok, {0xE4, 0x0A}, true)), kR + "\n");
  EXPECT_EQ(tok.decode(bytes(tok, {0xF0, 0x9F, 0x98, 'a'}, true)), kR + "a");  // one maximal subpart
  EXPECT_EQ(tok.decode(bytes(tok, {0x80, 0x80, 0xFF}, true)), kR + kR + kR);
  EXPECT_EQ(tok.decode(bytes(tok, {0xE4, 0xB8, 0xAD, 0xE4}, true)), "中" + kR);
}

// Streams `output` after `prompt`: every chunk is whole UTF-8 (U+FFFD allowed).
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& prompt, const std::vector<int32_t>& output,
                   bool skip) {
  std::string all;
  for (const std::string& chunk : test::stream_chunks(tok, prompt, output, skip)) {
    EXPECT_EQ(utf8::lossy(chunk), chunk) << "a chunk is not whole UTF-8";
    all += chunk;
  }
  return all;
}

// Random outputs of byte tokens (valid and invalid sequences), words and a special token.
void fuzz_stream(const Tokenizer& tok, bool byte_level, std::vector<int32_t> words) {
  const auto pool_bytes =
      bytes(tok, {0x61, 0x0A, 0xE4, 0xB8, 0xAD, 0xF0, 0x9F, 0x98, 0x8A, 0x80, 0xFF, 0xC3, 0xA9}, byte_level);
  std::vector<int32_t> pool = pool_bytes;
  pool.insert(pool.end(), words.begin(), words.end());
  pool.push_back(*tok.eos_id());
  const auto prompt = tok.encode("The dog ran");
  std::mt19937 rng(34);
  int with_replacement = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<int32_t> out(1 + rng() % 12);
    for (auto& id : out) id = pool[rng() % pool.size()];
    for (const bool skip : {true, false}) {
      const std::string want = test::expected_suffix(tok, prompt, out, skip);
      EXPECT_EQ(stream(tok, prompt, out, skip), want) << "round " << round << " skip " << skip;
      with_replacement += want.find(kR) != std::string::npos;
    }
  }
  EXPECT_GT(with_replacement, 100);  // the rounds did meet invalid sequences
}

TEST(ReplacementChars, ByteFallbackStreamsWhatItDecodes) {
  const Tokenizer& tok = stories();
  fuzz_stream(tok, false, tok.encode("the cat. Once", false));
  // A character finished inside a run that a later byte makes invalid is not streamed early.
  const auto prompt = tok.encode("The dog");
  auto out = bytes(tok, {0x61, 0xE4, 0x0A}, false);
  out.push_back(*tok.token_to_id("▁the"));
  EXPECT_EQ(stream(tok, prompt, out, true), kR + kR + kR + " the");
}

TEST(ReplacementChars, ByteLevelStreamsWhatItDecodes) {
  const Tokenizer& tok = qwen();
  fuzz_stream(tok, true, tok.encode(" the cat. Once", false));
  const auto prompt = tok.encode("The dog");
  EXPECT_EQ(stream(tok, prompt, bytes(tok, {0xE4, 0x0A}, true), true), kR + "\n");
  IncrementalDetokenizer detok(tok, prompt, true);
  EXPECT_EQ(detok.push(byte_id(tok, 0xE4, true)), "");  // could still begin a character
  EXPECT_EQ(detok.push(byte_id(tok, 0x0A, true)), kR + "\n");
}

}  // namespace
}  // namespace gs
