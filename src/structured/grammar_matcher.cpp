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

bool GrammarMatcher::token_fits(uint32_t node, const std::string& bytes) const {
  const Automaton& a = grammar_->automaton();
  size_t mark = pool_.size();
  thread_local std::vector<uint32_t> cur, next;
  cur.assign(1, node);
  StepFlags f;
  size_t used = 0;
  for (unsigned char b : bytes) {
    if (cur.empty()) break;
    next.clear();
    f = {};
    a.advance(pool_, cur, b, next, f);
    cur.swap(next);
    ++used;
  }
  bool ok = used == bytes.size() && (!cur.empty() || f.complete);
  pool_.resize(mark);
  return ok;
}

void GrammarMatcher::fill_mask(std::span<uint32_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0u);
  if (finished_) return;
  const TokenVocab& v = grammar_->vocab();
  for (uint32_t n : nodes_) {
    const MaskEntry& e = grammar_->entry(pool_[n].pos);
    for (size_t w = 0; w < e.accepted.size(); ++w) mask[w] |= e.accepted[w];
    for (int32_t id : e.uncertain) {
      uint32_t bit = 1u << (id & 31);
      if (!(mask[id >> 5] & bit) && token_fits(n, v.bytes(id))) mask[id >> 5] |= bit;
    }
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
