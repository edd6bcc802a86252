// MaskBuilder: builds the token-mask cache entries of one grammar (xgrammar's adaptive token
// mask) by walking the vocabulary trie through a lazily built DFA.
//
// A DFA state is a set of stacks over the unknown bottom (canonical: position lists, sorted)
// plus the flags of how it was reached; its transitions are computed on first use by running
// the automaton one byte and are shared by every position of the grammar, so after the first
// few positions a trie edge costs one table lookup. The walk
//  - skips a subtree whose prefix leaves no stack (all its tokens rejected, or uncertain when
//    the prefix ran past a rule end the grammar does not fix),
//  - accepts a whole subtree when every byte below it maps the state to itself (inside a string
//    or a star, most of the vocabulary), found from the trie's per-subtree byte sets.
// A token is accepted when a stack survives it or it ends exactly where a rule ends over the
// bottom; uncertain when it ran past such an end; rejected otherwise (CompiledGrammar's rule).
#pragma once
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "structured/automaton.h"
#include "structured/compiled_grammar.h"
#include "structured/token_vocab.h"

namespace gs::structured {

class MaskBuilder {
 public:
  MaskBuilder(const Automaton& automaton, const TokenVocab& vocab);

  // The cache entry of scanning position `pos`.
  MaskEntry build(uint32_t pos);
  size_t num_states() const { return states_.size(); }

 private:
  struct State {
    std::vector<uint32_t> stacks;  // per stack: its length, then positions top to bottom
    bool live = false;             // a stack survives
    bool ends_rule = false;        // the last byte ended a rule over the bottom, or the root
    bool past_bottom = false;      // some byte ended a rule over the bottom with no fixed return
    std::array<int32_t, 256> next;
    ByteSet loop_yes, loop_no;  // bytes known to map the state to itself, or not
  };
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };

  int32_t start(uint32_t pos);
  int32_t step(int32_t s, uint8_t byte);
  // Every byte of `bytes` maps state `s` to itself.
  bool loops_over(int32_t s, const ByteSet& bytes);
  int32_t intern(const std::vector<uint32_t>& out, const StepFlags& flags, bool past_bottom);

  const Automaton& automaton_;
  const TokenVocab& vocab_;
  std::vector<State> states_;
  std::unordered_map<std::vector<uint32_t>, int32_t, KeyHash> index_;
  NodePool pool_;
  std::vector<uint32_t> in_, out_;
  std::vector<std::vector<uint32_t>> scratch_;
  std::vector<int32_t> depth_state_;
};

}  // namespace gs::structured
