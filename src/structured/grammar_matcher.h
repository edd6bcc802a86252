// GrammarMatcher: one request's parse under a compiled grammar.
//
// accept_token() advances the pushdown automaton by a sampled token's bytes; fill_mask() writes
// the bitmask of the tokens allowed next (bit id % 32 of word id / 32 set: allowed). A
// rejected token leaves the state unchanged. Not thread-safe; the CompiledGrammar it shares is.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "structured/compiled_grammar.h"

namespace gs::structured {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // False (state unchanged) when the grammar does not allow `token` here.
  bool accept_token(int32_t token);
  // Feeds raw bytes (tests, forced prefixes); false (state unchanged) when not allowed.
  bool accept_bytes(std::string_view bytes);
  // `mask` has vocab().mask_words() words.
  void fill_mask(std::span<uint32_t> mask) const;
  bool can_end() const { return complete_; }   // the output so far is a whole sentence
  bool finished() const { return finished_; }  // an end token was accepted
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  bool step(std::string_view bytes, std::vector<uint32_t>& nodes, bool& complete);
  // Sets the bits of the entry's uncertain tokens that node `node` accepts.
  void check_uncertain(uint32_t node, const MaskEntry& e, std::span<uint32_t> mask) const;
  void compact();

  std::shared_ptr<const CompiledGrammar> grammar_;
  mutable NodePool pool_;
  std::vector<uint32_t> nodes_;  // scanning nodes
  bool complete_ = false;
  bool finished_ = false;
};

}  // namespace gs::structured
