// Implements tokenizer/tokenizer.h (Tokenizer).
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace gs {

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view input, bool add_special) const {
  // Invalid UTF-8 cannot reach a Unicode regex; such bytes are encoded as U+FFFD.
  const std::string text = utf8::lossy(input);
  std::vector<int32_t> ids;
  if (add_special) ids = post.prefix;
  // As tokenizers' AddedVocabulary::extract_and_normalize: raw added tokens first, then each
  // remaining piece is normalized and searched for normalized added tokens.
  for (const auto& raw : added.split(text, /*normalized=*/false)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string norm = normalizer.normalize(std::string_view(text).substr(raw.begin, raw.end - raw.begin));
    for (const auto& sub : added.split(norm, /*normalized=*/true)) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
        continue;
      }
      std::vector<Piece> pieces{{norm.substr(sub.begin, sub.end - sub.begin), raw.begin == 0 && sub.begin == 0}};
      for (const auto& word : pre_tokenizer.split(std::move(pieces))) model.encode_word(word.text, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), post.suffix.begin(), post.suffix.end());
  return ids;
}

const std::string* Tokenizer::Impl::token(int32_t id) const {
  if (const AddedToken* t = added.by_id(id)) return &t->content;
  return model.id_to_token(id);
}

std::string Tokenizer::Impl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special && special.contains(id)) continue;
    if (const std::string* t = token(id)) tokens.push_back(*t);  // unknown ids are skipped
  }
  return decoder.decode(std::move(tokens));
}

std::shared_ptr<Tokenizer::Impl> make_byte_level_impl(TokenMap vocab, int vocab_size, const char* name,
                                                      std::string chat_template) {
  GS_CHECK(vocab_size >= 258, "{}: vocab_size is {} but must be >= 258 (256 bytes, <s>, </s>)", name, vocab_size);
  return std::make_shared<Tokenizer::Impl>(
      Tokenizer::Impl{.model = BpeModel(std::move(vocab), {}, {}, name),
                      .added = AddedVocab({AddedToken{.id = 256, .content = "<s>", .special = true},
                                           AddedToken{.id = 257, .content = "</s>", .special = true}}),
                      .normalizer = {},
                      .pre_tokenizer = PreTokenizer::byte_level(),
                      .post = PostProcessor{{256}, {}},
                      .decoder = Decoder::byte_level(),
                      .size = vocab_size,
                      .special = {256, 257},
                      .bos_id = 256,
                      .eos_id = 257,
                      .bos_token = "<s>",
                      .eos_token = "</s>",
                      .chat_template = std::move(chat_template)});
}

Tokenizer Tokenizer::byte_level(int vocab_size) {
  TokenMap vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace(bytes_to_chars(std::string(1, static_cast<char>(b))), b);
  Tokenizer t;
  t.impl_ = make_byte_level_impl(std::move(vocab), vocab_size, "byte-level tokenizer", "");
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}
std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}
int Tokenizer::size() const { return impl_->size; }
std::string Tokenizer::token_bytes(int32_t id) const {
  const std::string* t = impl_->token(id);
  return t ? impl_->decoder.token_bytes(*t) : std::string();
}
std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* t = impl_->token(id);
  return t ? *t : std::string();
}
std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.by_content(token)) return id;
  return impl_->model.token_to_id(token);
}
bool Tokenizer::is_special(int32_t id) const { return impl_->special.contains(id); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
std::string Tokenizer::bos_token() const { return impl_->bos_token; }
std::string Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace gs
