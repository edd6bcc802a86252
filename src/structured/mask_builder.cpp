#include "structured/mask_builder.h"

#include <algorithm>

namespace gs::structured {

size_t MaskBuilder::KeyHash::operator()(const std::vector<uint32_t>& k) const {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t x : k) h = (h ^ x) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

MaskBuilder::MaskBuilder(const Automaton& automaton, const TokenVocab& vocab) : automaton_(automaton), vocab_(vocab) {}

// Canonicalizes the stacks of `out` (nodes of pool_) with the flags into a state.
int32_t MaskBuilder::intern(const std::vector<uint32_t>& out, const StepFlags& flags, bool past_bottom) {
  scratch_.resize(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    auto& st = scratch_[i];
    st.clear();
    for (uint32_t n = out[i]; n != kUnknownParent && n != kRootParent; n = pool_[n].parent) st.push_back(pool_[n].pos);
  }
  std::sort(scratch_.begin(), scratch_.begin() + static_cast<long>(out.size()));
  const auto last = std::unique(scratch_.begin(), scratch_.begin() + static_cast<long>(out.size()));
  const bool ends_rule = flags.bottom || flags.complete;
  std::vector<uint32_t> key{(ends_rule ? 1u : 0u) | (past_bottom ? 2u : 0u)};
  for (auto it = scratch_.begin(); it != last; ++it) {
    key.push_back(static_cast<uint32_t>(it->size()));
    key.insert(key.end(), it->begin(), it->end());
  }
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  State s;
  s.live = last != scratch_.begin();
  s.ends_rule = ends_rule;
  s.past_bottom = past_bottom;
  s.stacks.assign(key.begin() + 1, key.end());
  s.next.fill(-1);
  states_.push_back(std::move(s));
  const auto id = static_cast<int32_t>(states_.size() - 1);
  index_.emplace(std::move(key), id);
  return id;
}

// The position's own node, not expanded: leaving a star before its first byte is the entry
// of the node the matcher reaches that way.
int32_t MaskBuilder::start(uint32_t pos) {
  pool_.assign(1, {pos, kUnknownParent});
  out_.assign(1, 0);
  return intern(out_, {}, false);
}

int32_t MaskBuilder::step(int32_t s, uint8_t byte) {
  if (int32_t n = states_[s].next[byte]; n >= 0) return n;
  pool_.clear();
  in_.clear();
  const std::vector<uint32_t>& st = states_[s].stacks;
  for (size_t i = 0; i < st.size();) {
    const uint32_t len = st[i];
    uint32_t parent = kUnknownParent;
    for (uint32_t j = len; j > 0; --j) {
      pool_.push_back({st[i + j], parent});
      parent = static_cast<uint32_t>(pool_.size() - 1);
    }
    in_.push_back(parent);
    i += len + 1;
  }
  out_.clear();
  StepFlags f;
  automaton_.advance(pool_, in_, byte, out_, f);
  const int32_t n = intern(out_, f, states_[s].past_bottom || f.bottom);
  states_[s].next[byte] = n;
  return n;
}

bool MaskBuilder::loops_over(int32_t s, const ByteSet& bytes) {
  if ((bytes & states_[s].loop_no).any()) return false;
  const ByteSet todo = bytes & ~states_[s].loop_yes;
  for (size_t b = todo._Find_first(); b < todo.size(); b = todo._Find_next(b)) {
    if (step(s, static_cast<uint8_t>(b)) != s) {
      states_[s].loop_no.set(b);
      return false;
    }
    states_[s].loop_yes.set(b);
  }
  return true;
}

MaskEntry MaskBuilder::build(uint32_t pos) {
  MaskEntry out;
  out.accepted.assign(vocab_.mask_words(), 0);
  const auto& nodes = vocab_.trie().nodes();
  const auto& below = vocab_.trie().below_sets();
  const auto& sorted = vocab_.sorted();
  auto accept = [&](uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to; ++i) out.accepted[sorted[i] >> 5] |= 1u << (sorted[i] & 31);
  };
  auto uncertain = [&](uint32_t from, uint32_t to) {
    out.uncertain.insert(out.uncertain.end(), sorted.begin() + from, sorted.begin() + to);
  };
  depth_state_.assign(1, start(pos));
  if (nodes[0].below >= 0 && loops_over(depth_state_[0], below[nodes[0].below])) {
    accept(0, nodes[0].tok_end);
    return out;
  }
  for (uint32_t k = 1; k < nodes.size();) {
    const TrieNode& n = nodes[k];
    const int32_t s = step(depth_state_[n.depth - 1], n.byte);
    const State& st = states_[s];
    if (!st.live) {
      if (st.ends_rule)
        accept(n.tok_begin, n.own_end);
      else if (st.past_bottom)
        uncertain(n.tok_begin, n.own_end);
      if (st.past_bottom) uncertain(n.own_end, n.tok_end);
      k = n.end;
      continue;
    }
    accept(n.tok_begin, n.own_end);
    if (n.below >= 0 && n.own_end < n.tok_end && loops_over(s, below[n.below])) {
      accept(n.own_end, n.tok_end);
      k = n.end;
      continue;
    }
    if (depth_state_.size() <= n.depth) depth_state_.resize(n.depth + 1);
    depth_state_[n.depth] = s;
    ++k;
  }
  out.uncertain_lcp.assign(out.uncertain.size(), 0);
  for (size_t i = 1; i < out.uncertain.size(); ++i) {
    const std::string& a = vocab_.bytes(out.uncertain[i - 1]);
    const std::string& b = vocab_.bytes(out.uncertain[i]);
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    out.uncertain_lcp[i] = static_cast<uint16_t>(n);
  }
  return out;
}

}  // namespace gs::structured
