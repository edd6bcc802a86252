#include "structured/compiled_grammar.h"

namespace gs::structured {

CompiledGrammar::CompiledGrammar(const Grammar& g, std::shared_ptr<const TokenVocab> vocab)
    : automaton_(g), vocab_(std::move(vocab)), num_rules_(g.rules.size()), entries_(automaton_.num_positions()) {}

const MaskEntry& CompiledGrammar::entry(uint32_t pos) const {
  {
    std::lock_guard lock(mu_);
    if (entries_[pos]) return *entries_[pos];
  }
  auto built = std::make_unique<const MaskEntry>(build(pos));
  std::lock_guard lock(mu_);
  if (!entries_[pos]) entries_[pos] = std::move(built);
  return *entries_[pos];
}

void CompiledGrammar::warm() const {
  for (uint32_t p = 0; p < automaton_.num_positions(); ++p)
    if (automaton_.is_scanning(p)) entry(p);
}

// Walks the vocabulary in byte order from the position over an unknown bottom; a token's walk
// reuses its predecessor's states for their common prefix.
MaskEntry CompiledGrammar::build(uint32_t pos) const {
  const TokenVocab& v = *vocab_;
  MaskEntry out;
  out.accepted.assign(v.mask_words(), 0);
  NodePool pool;
  pool.push_back({pos, kUnknownParent});
  struct Level {
    std::vector<uint32_t> nodes;
    size_t pool_mark = 0;
    bool bottom_here = false, complete_here = false, bottom_so_far = false;
  };
  std::vector<Level> levels(1);
  levels[0].nodes = {0};
  levels[0].pool_mark = pool.size();
  size_t done = 0;  // levels[0..done] hold the previous token's prefix
  const auto& sorted = v.sorted();
  const auto& lcp = v.lcp();
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int32_t id = sorted[i];
    const std::string& t = v.bytes(id);
    size_t d = std::min<size_t>(i ? lcp[i] : 0, done);
    pool.resize(levels[d].pool_mark);
    while (d < t.size() && !levels[d].nodes.empty()) {
      if (levels.size() <= d + 1) levels.resize(d + 2);
      Level& next = levels[d + 1];
      next.nodes.clear();
      StepFlags f;
      automaton_.advance(pool, levels[d].nodes, static_cast<uint8_t>(t[d]), next.nodes, f);
      next.bottom_here = f.bottom;
      next.complete_here = f.complete;
      next.bottom_so_far = levels[d].bottom_so_far || f.bottom;
      next.pool_mark = pool.size();
      ++d;
    }
    done = d;
    bool accepted = false, uncertain = false;
    if (d == t.size()) {
      const Level& l = levels[d];
      accepted = !l.nodes.empty() || l.bottom_here || l.complete_here;
      uncertain = !accepted && d > 0 && levels[d - 1].bottom_so_far;
    } else {
      uncertain = levels[d].bottom_so_far;
    }
    if (accepted)
      out.accepted[id >> 5] |= 1u << (id & 31);
    else if (uncertain)
      out.uncertain.push_back(id);
  }
  return out;
}

}  // namespace gs::structured
