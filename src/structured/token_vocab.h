// TokenVocab: every token's bytes, sorted so that tokens sharing a prefix are neighbours.
//
// Built once per tokenizer from Tokenizer::token_bytes (byte-level BPE, SentencePiece byte
// fallback and added tokens all reduce to bytes). Special tokens and tokens without bytes are
// never produced under a constraint, except the end tokens, which a constraint allows where
// its grammar can end.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "structured/vocab_trie.h"

namespace gs {
class Tokenizer;
}

namespace gs::structured {

class TokenVocab {
 public:
  // `vocab_size`: the model's logits width (ids past the tokenizer's have no bytes; the
  // tokenizer's ids past it are never produced).
  TokenVocab(const Tokenizer& tok, int vocab_size, std::vector<int32_t> end_tokens);
  TokenVocab(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens);

  int size() const { return static_cast<int>(bytes_.size()); }
  int mask_words() const { return (size() + 31) / 32; }  // uint32 words of one bitmask row
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool is_end(int32_t id) const;

  // The tokens a constraint may produce, sorted by bytes, and each one's common prefix length
  // with its predecessor in that order.
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<uint16_t>& lcp() const { return lcp_; }
  // The same tokens as a trie (sorted() order is its preorder).
  const VocabTrie& trie() const { return trie_; }

 private:
  void index();
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> lcp_;
  VocabTrie trie_;
};

}  // namespace gs::structured
