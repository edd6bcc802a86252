// VocabTrie: the vocabulary's tokens as a byte trie laid out in preorder, so a walk can skip a
// whole subtree (every token sharing a prefix) with one jump.
//
// Node 0 is the root (the empty prefix). Each other node is one byte appended to its parent's
// prefix. A node's subtree is the preorder range [node, end); the tokens whose bytes start with
// its prefix are a contiguous range of TokenVocab::sorted(), the first of which end exactly at
// the node. Nodes with many tokens below them also record the set of bytes used strictly below
// them, so a walk can accept a whole subtree when none of those bytes leaves its state.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "structured/grammar.h"

namespace gs::structured {

struct TrieNode {
  uint32_t end = 0;        // one past the subtree's last node
  uint32_t tok_begin = 0;  // sorted-token range of the subtree
  uint32_t own_end = 0;    // tokens [tok_begin, own_end) end at this node
  uint32_t tok_end = 0;
  int32_t below = -1;  // index into below_sets(), or -1 for a small subtree
  uint16_t depth = 0;
  uint8_t byte = 0;  // the byte on the edge into this node
};

class VocabTrie {
 public:
  VocabTrie() = default;
  // `sorted`: token ids sorted by bytes; `lcp`: each one's common prefix with its predecessor.
  VocabTrie(const std::vector<std::string>& bytes, const std::vector<int32_t>& sorted,
            const std::vector<uint16_t>& lcp);

  const std::vector<TrieNode>& nodes() const { return nodes_; }
  const std::vector<ByteSet>& below_sets() const { return below_; }

 private:
  std::vector<TrieNode> nodes_;
  std::vector<ByteSet> below_;
};

}  // namespace gs::structured
