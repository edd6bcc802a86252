#include "structured/token_vocab.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace gs::structured {

TokenVocab::TokenVocab(const Tokenizer& tok, int vocab_size, std::vector<int32_t> end_tokens)
    : end_tokens_(std::move(end_tokens)) {
  bytes_.resize(vocab_size);
  for (int id = 0; id < std::min(vocab_size, tok.size()); ++id)
    if (!tok.is_special(id)) bytes_[id] = tok.token_bytes(id);
  for (int32_t e : end_tokens_)
    if (e >= 0 && e < static_cast<int32_t>(bytes_.size())) bytes_[e].clear();
  index();
}

TokenVocab::TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens)
    : bytes_(std::move(token_bytes)), end_tokens_(std::move(end_tokens)) {
  for (int32_t e : end_tokens_)
    if (e >= 0 && e < static_cast<int32_t>(bytes_.size())) bytes_[e].clear();
  index();
}

bool TokenVocab::is_end(int32_t id) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), id) != end_tokens_.end();
}

void TokenVocab::index() {
  for (int32_t id = 0; id < size(); ++id)
    if (!bytes_[id].empty() && bytes_[id].size() < 0xFFFF) sorted_.push_back(id);
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[sorted_[i - 1]];
    const std::string& b = bytes_[sorted_[i]];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    lcp_[i] = static_cast<uint16_t>(n);
  }
  trie_ = VocabTrie(bytes_, sorted_, lcp_);
}

}  // namespace gs::structured
