// Implements tokenizer/added_vocab.h.
#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace gs {

namespace {

// Start of the whitespace run that ends at `end` (lstrip).
size_t whitespace_before(std::string_view text, size_t end) {
  size_t b = end;
  while (b > 0) {
    size_t s = b - 1, n = 0;
    while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
    if (!utf8::is_whitespace(utf8::decode_at(text, s, &n))) break;
    b = s;
  }
  return b;
}

// End of the whitespace run that starts at `begin` (rstrip).
size_t whitespace_after(std::string_view text, size_t begin) {
  size_t e = begin, n = 0;
  while (e < text.size() && utf8::is_whitespace(utf8::decode_at(text, e, &n))) e += n;
  return e;
}

bool word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t s = pos - 1, n = 0;
  while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
  return utf8::is_word_char(utf8::decode_at(text, s, &n));
}

bool word_char_after(std::string_view text, size_t pos) {
  size_t n = 0;
  return pos < text.size() && utf8::is_word_char(utf8::decode_at(text, pos, &n));
}

}  // namespace

AddedVocab::AddedVocab(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_[t.content] = i;
    if (t.content.empty()) continue;
    auto& buckets = t.normalized ? normalized_ : raw_;
    buckets[static_cast<unsigned char>(t.content[0])].push_back(i);
  }
  for (auto* b : {&raw_, &normalized_})
    for (auto& v : *b)
      std::stable_sort(v.begin(), v.end(),
                       [&](size_t x, size_t y) { return tokens_[x].content.size() > tokens_[y].content.size(); });
}

std::optional<size_t> AddedVocab::longest_at(std::string_view text, size_t pos, const Buckets& b) const {
  for (size_t i : b[static_cast<unsigned char>(text[pos])])
    if (text.substr(pos).starts_with(tokens_[i].content)) return i;
  return std::nullopt;
}

std::vector<AddedVocab::Split> AddedVocab::split(std::string_view text, bool normalized) const {
  const Buckets& buckets = normalized ? normalized_ : raw_;
  std::vector<Split> out;
  size_t done = 0;  // end of the last emitted split
  for (size_t pos = 0; pos < text.size();) {
    const auto hit = longest_at(text, pos, buckets);
    if (!hit) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[*hit];
    size_t begin = pos, end = pos + t.content.size();
    if (t.single_word && (word_char_before(text, begin) || word_char_after(text, end))) {
      pos = end;  // a rejected match is skipped whole, as an Aho-Corasick scan does
      continue;
    }
    if (t.lstrip) begin = std::max(whitespace_before(text, begin), done);
    if (t.rstrip) end = whitespace_after(text, end);
    if (begin > done) out.push_back({done, begin, -1});
    out.push_back({begin, end, t.id});
    done = pos = end;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
  return out;
}

const AddedToken* AddedVocab::by_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocab::by_content(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

}  // namespace gs
