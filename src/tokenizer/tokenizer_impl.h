// The shared, immutable state behind gs::Tokenizer: the tokenizer.json pipeline (added tokens,
// normalizer, pre-tokenizer, BPE model, post-processor, decoder) plus tokenizer_config.json.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace gs {

struct Tokenizer::Impl {
  BpeModel model;
  AddedVocab added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  PostProcessor post;
  Decoder decoder;
  int size = 0;                         // len(tokenizer)
  std::unordered_set<int32_t> special;  // ids decode(skip_special_tokens) removes
  std::optional<int32_t> bos_id, eos_id;
  std::string bos_token, eos_token, chat_template;

  // max_tokens: see Tokenizer::encode (SIZE_MAX: no limit).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens, size_t max_tokens) const;
  // Appends the words of one normalized piece, and one word (tokenizer.cpp); false once ids
  // exceed max_tokens.
  bool encode_words(const std::string& text, bool at_start, std::vector<int32_t>& ids, size_t max_tokens) const;
  bool encode_word(std::string_view word, std::vector<int32_t>& ids, size_t max_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // The vocabulary string of `id` (added tokens first); nullptr when the id is unknown.
  const std::string* token(int32_t id) const;
};

// The built-in byte-level pipeline of Tokenizer::byte_level and Tokenizer::dummy: `vocab` (the 256
// bytes first, in byte_level's characters), <s> = 256 and </s> = 257, no merges.
std::shared_ptr<Tokenizer::Impl> make_byte_level_impl(TokenMap vocab, int vocab_size, const char* name,
                                                      std::string chat_template);

}  // namespace gs
