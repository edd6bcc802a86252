// Implements tokenizer/tokenizer.h (Tokenizer).
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace gs {

namespace {

// A text longer than this many bytes per token still allowed is first split in prefixes.
constexpr size_t kPrefixBytesPerToken = 16;
constexpr size_t kMinPrefixBytes = size_t(64) << 10;
// The last words of a prefix may continue past its end (a regex match cut short, a lookahead
// that sees the end): they are not the text's words. Every word before them is.
constexpr size_t kUnstableWords = 2;

// A long word under a limit is encoded in parts of about this many bytes, where the model allows.
constexpr size_t kWordPartBytes = 64;

// The largest character boundary of `s` at or below `at`.
size_t char_boundary(const std::string& s, size_t at) {
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace

// A word with no split by the pre-tokenizer (SentencePiece's whole text) is cut before "▁"s
// where no merge can cross (BpeModel::cuts_before_metaspace), so it too stops at the limit.
bool Tokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& ids, size_t max_tokens) const {
  if (max_tokens == SIZE_MAX || word.size() <= kWordPartBytes || !model.cuts_before_metaspace()) {
    model.encode_word(word, ids);
    return ids.size() <= max_tokens;
  }
  for (size_t begin = 0; begin < word.size();) {
    const size_t end = metaspace_cut(word, begin + kWordPartBytes);
    model.encode_word(word.substr(begin, end - begin), ids);
    if (ids.size() > max_tokens) return false;
    begin = end;
  }
  return true;
}

// A long text under a limit is split in growing prefixes: if the stable words of a prefix
// already hold more than max_tokens tokens, the text has more, and the rest is never split.
bool Tokenizer::Impl::encode_words(const std::string& text, bool at_start, std::vector<int32_t>& ids,
                                   size_t max_tokens) const {
  if (ids.size() > max_tokens) return false;
  const size_t left = max_tokens - ids.size();
  size_t prefix =
      left > SIZE_MAX / kPrefixBytesPerToken ? SIZE_MAX : std::max(kMinPrefixBytes, left * kPrefixBytesPerToken);
  for (; prefix<text.size(); prefix = prefix> SIZE_MAX / 2 ? SIZE_MAX : prefix * 2) {
    const size_t cut = char_boundary(text, prefix);
    const auto words = pre_tokenizer.split({Piece{text.substr(0, cut), at_start}});
    const size_t base = ids.size();
    for (size_t w = 0; w + kUnstableWords < words.size(); ++w)
      if (!encode_word(words[w].text, ids, max_tokens)) return false;
    ids.resize(base);  // it may fit: split the text whole (or a longer prefix)
  }
  for (const auto& word : pre_tokenizer.split({Piece{text, at_start}}))
    if (!encode_word(word.text, ids, max_tokens)) return false;
  return true;
}

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view input, bool add_special, size_t max_tokens) const {
  // Invalid UTF-8 cannot reach a Unicode regex; such bytes are encoded as U+FFFD.
  const std::string text = utf8::lossy(input);
  std::vector<int32_t> ids;
  if (add_special) ids = post.prefix;
  // As tokenizers' AddedVocabulary::extract_and_normalize: raw added tokens first, then each
  // remaining piece is normalized and searched for normalized added tokens.
  for (const auto& raw : added.split(text, /*normalized=*/false)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      if (ids.size() > max_tokens) return ids;
      continue;
    }
    const std::string norm = normalizer.normalize(std::string_view(text).substr(raw.begin, raw.end - raw.begin));
    for (const auto& sub : added.split(norm, /*normalized=*/true)) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
      } else if (!encode_words(norm.substr(sub.begin, sub.end - sub.begin), raw.begin == 0 && sub.begin == 0, ids,
                               max_tokens)) {
        return ids;
      }
      if (ids.size() > max_tokens) return ids;
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
  return impl_->encode(text, add_special_tokens, SIZE_MAX);
}
std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens, size_t max_tokens) const {
  return impl_->encode(text, add_special_tokens, max_tokens);
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
