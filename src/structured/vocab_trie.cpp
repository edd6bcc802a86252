#include "structured/vocab_trie.h"

namespace gs::structured {

namespace {
// Subtrees with at least this many tokens record the bytes below them.
constexpr uint32_t kMinTokensForBelowSet = 16;
}  // namespace

VocabTrie::VocabTrie(const std::vector<std::string>& bytes, const std::vector<int32_t>& sorted,
                     const std::vector<uint16_t>& lcp) {
  nodes_.push_back({});
  std::vector<uint32_t> path{0};  // path[d]: the node of depth d on the current token's prefix
  auto close_to = [&](size_t depth, uint32_t tok) {
    while (path.size() > depth + 1) {
      TrieNode& n = nodes_[path.back()];
      n.end = static_cast<uint32_t>(nodes_.size());
      n.tok_end = tok;
      path.pop_back();
    }
  };
  for (uint32_t i = 0; i < sorted.size(); ++i) {
    const std::string& t = bytes[sorted[i]];
    close_to(i ? lcp[i] : 0, i);
    for (size_t d = path.size() - 1; d < t.size(); ++d) {
      TrieNode n;
      n.tok_begin = n.own_end = i;
      n.depth = static_cast<uint16_t>(d + 1);
      n.byte = static_cast<uint8_t>(t[d]);
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    nodes_[path.back()].own_end = i + 1;
  }
  close_to(0, static_cast<uint32_t>(sorted.size()));
  nodes_[0].end = static_cast<uint32_t>(nodes_.size());
  nodes_[0].tok_end = static_cast<uint32_t>(sorted.size());
  for (uint32_t k = 0; k < nodes_.size(); ++k) {
    TrieNode& n = nodes_[k];
    if (n.tok_end - n.tok_begin < kMinTokensForBelowSet) continue;
    ByteSet s;
    for (uint32_t j = k + 1; j < n.end; ++j) s.set(nodes_[j].byte);
    n.below = static_cast<int32_t>(below_.size());
    below_.push_back(s);
  }
}

}  // namespace gs::structured
