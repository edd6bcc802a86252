// Implements Tokenizer::dummy (tokenizer/tokenizer.h): the byte-level tokenizer, plus one
// pseudo-word (" kato", " bimu", ...) for each id above the bytes and <s> </s>, and a plain
// chat template. Text still encodes byte by byte (there are no merges); decoding random ids
// gives visible words, so a model with random weights answers with text a user can see.
#include <string>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace gs {
namespace {

constexpr std::string_view kConsonants = "bdfghklmnprstvz";
constexpr std::string_view kVowels = "aeiou";

// Bijective base-75 over consonant-vowel syllables: every n gets its own word.
std::string pseudo_word(int64_t n) {
  const int64_t base = int64_t(kConsonants.size() * kVowels.size());
  std::string word;
  for (int64_t k = n + 1; k > 0; k = (k - 1) / base) {
    const int64_t s = (k - 1) % base;
    word.insert(
        0, std::string{kConsonants[size_t(s / int64_t(kVowels.size()))], kVowels[size_t(s % int64_t(kVowels.size()))]});
  }
  return " " + word;
}

constexpr const char* kPlainChatTemplate =
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

}  // namespace

Tokenizer Tokenizer::dummy(int vocab_size) {
  TokenMap vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace(bytes_to_chars(std::string(1, static_cast<char>(b))), b);
  for (int id = 258; id < vocab_size; ++id) vocab.emplace(bytes_to_chars(pseudo_word(id - 258)), id);
  Tokenizer t;
  t.impl_ = make_byte_level_impl(std::move(vocab), vocab_size, "dummy tokenizer", kPlainChatTemplate);
  return t;
}

}  // namespace gs
