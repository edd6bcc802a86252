#include "structured/grammar_matcher.h"

#include <unordered_map>

namespace gs::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  StepFlags f;
  grammar_->automaton().start(pool_, nodes_, f);
  complete_ = f.complete;
}

bool GrammarMatcher::step(std::string_view bytes, std::vector<uint32_t>& nodes, bool& complete) {
  const Automaton& a = grammar_->automaton();
  std::vector<uint32_t> next;
  StepFlags f;
  for (unsigned char b : bytes) {
    next.clear();
    f = {};
    a.advance(pool_, nodes, b, next, f);
    nodes.swap(next);
    if (nodes.empty() && !f.complete) return false;
  }
  if (!bytes.empty()) complete = f.complete;
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (finished_) return false;
  size_t mark = pool_.size();
  std::vector<uint32_t> nodes = nodes_;
  bool complete = complete_;
  if (!step(bytes, nodes, complete)) {
    pool_.resize(mark);
    return false;
  }
  nodes_ = std::move(nodes);
  complete_ = complete;
  if (pool_.size() > 4096 && pool_.size() > 8 * nodes_.size()) compact();
  return true;
}

bool GrammarMatcher::accept_token(int32_t token) {
  const TokenVocab& v = grammar_->vocab();
  if (finished_ || token < 0 || token >= v.size()) return false;
  if (v.is_end(token)) {
    if (!complete_) return false;
    finished_ = true;
    return true;
  }
  const std::string& b = v.bytes(token);
  return !b.empty() && accept_bytes(b);
}

// Walks the uncertain tokens in byte order from the real stack, reusing the previous token's
// states for their common prefix; a prefix that leaves no stack rejects every token after it
// that shares it at once.
void GrammarMatcher::check_uncertain(uint32_t node, const MaskEntry& e, std::span<uint32_t> mask) const {
  const Automaton& a = grammar_->automaton();
  const TokenVocab& v = grammar_->vocab();
  struct Level {
    std::vector<uint32_t> nodes;
    size_t pool_mark = 0;
    bool complete = false;
  };
  thread_local std::vector<Level> levels;
  const size_t mark = pool_.size();
  if (levels.empty()) levels.resize(1);
  levels[0].nodes.assign(1, node);
  levels[0].pool_mark = mark;
  size_t done = 0;  // levels[0..done] hold the prefix of the last token walked
  for (size_t i = 0; i < e.uncertain.size(); ++i) {
    const int32_t id = e.uncertain[i];
    done = std::min<size_t>(done, e.uncertain_lcp[i]);
    const uint32_t bit = 1u << (id & 31);
    if (mask[id >> 5] & bit) continue;
    const std::string& t = v.bytes(id);
    size_t d = done;
    pool_.resize(levels[d].pool_mark);
    while (d < t.size() && !levels[d].nodes.empty()) {
      if (levels.size() <= d + 1) levels.resize(d + 2);
      Level& next = levels[d + 1];
      next.nodes.clear();
      StepFlags f;
      a.advance(pool_, levels[d].nodes, static_cast<uint8_t>(t[d]), next.nodes, f);
      next.complete = f.complete;
      next.pool_mark = pool_.size();
      ++d;
    }
    done = d;
    if (d == t.size() && (!levels[d].nodes.empty() || levels[d].complete)) mask[id >> 5] |= bit;
  }
  pool_.resize(mark);
}

void GrammarMatcher::fill_mask(std::span<uint32_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0u);
  if (finished_) return;
  const TokenVocab& v = grammar_->vocab();
  for (uint32_t n : nodes_) {
    const MaskEntry& e = grammar_->entry(pool_[n].pos);
    for (size_t w = 0; w < e.accepted.size(); ++w) mask[w] |= e.accepted[w];
    if (!e.uncertain.empty()) check_uncertain(n, e, mask);
  }
  if (complete_)
    for (int32_t id : v.end_tokens())
      if (id >= 0 && id < v.size()) mask[id >> 5] |= 1u << (id & 31);
}

// Copies the live stacks into a fresh pool (the persistent stacks leave garbage behind).
void GrammarMatcher::compact() {
  NodePool fresh;
  std::unordered_map<uint32_t, uint32_t> moved;
  auto copy = [&](auto&& self, uint32_t n) -> uint32_t {
    if (n == kRootParent || n == kUnknownParent) return n;
    if (auto it = moved.find(n); it != moved.end()) return it->second;
    uint32_t parent = self(self, pool_[n].parent);
    fresh.push_back({pool_[n].pos, parent});
    uint32_t id = static_cast<uint32_t>(fresh.size() - 1);
    moved[n] = id;
    return id;
  };
  for (auto& n : nodes_) n = copy(copy, n);
  pool_ = std::move(fresh);
}

}  // namespace gs::structured
