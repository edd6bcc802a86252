#include "structured/automaton.h"

#include "structured/constraint_error.h"

namespace gs::structured {

namespace {
// Expansions of one step beyond this mean an ambiguous grammar blowing up.
constexpr size_t kMaxExpansionsPerStep = 200000;
}  // namespace

Automaton::Automaton(const Grammar& g) : root_(g.root) {
  for (const auto& s : g.byte_sets) {
    std::array<uint64_t, 4> w{};
    for (int b = 0; b < 256; ++b)
      if (s.test(b)) w[b >> 6] |= uint64_t{1} << (b & 63);
    sets_.push_back(w);
  }
  alt_starts_.resize(g.rules.size());
  for (uint32_t r = 0; r < g.rules.size(); ++r)
    for (const auto& alt : g.rules[r].alternatives) {
      alt_starts_[r].push_back(static_cast<uint32_t>(elems_.size()));
      for (const auto& s : alt) elems_.push_back({static_cast<Element::Kind>(s.kind), s.arg});
      elems_.push_back({Element::kEnd, r});
    }
  // Continuations: the lattice unset < one value < none, to a fixpoint.
  constexpr uint32_t kUnset = 0xFFFFFFFDu;
  continuation_.assign(g.rules.size(), kUnset);
  continuation_[root_] = kRootEnd;
  auto join = [&](uint32_t& c, uint32_t v) {
    if (v == kUnset || c == v || c == kNoContinuation) return false;
    c = (c == kUnset) ? v : kNoContinuation;
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t p = 0; p < elems_.size(); ++p) {
      if (elems_[p].kind != Element::kRule) continue;
      uint32_t callee = elems_[p].arg;
      const Element& next = elems_[p + 1];
      uint32_t v = (next.kind == Element::kEnd) ? (next.arg == callee ? kUnset : continuation_[next.arg]) : p + 1;
      changed |= join(continuation_[callee], v);
    }
  }
  for (auto& c : continuation_)
    if (c == kUnset) c = kNoContinuation;
}

uint32_t Automaton::push(NodePool& pool, uint32_t pos, uint32_t parent) const {
  pool.push_back({pos, parent});
  return static_cast<uint32_t>(pool.size() - 1);
}

void Automaton::start(NodePool& pool, std::vector<uint32_t>& out, StepFlags& flags) const {
  for (uint32_t a : alt_starts_[root_]) expand(pool, push(pool, a, kRootParent), out, flags);
}

void Automaton::expand(NodePool& pool, uint32_t n, std::vector<uint32_t>& out, StepFlags& flags) const {
  thread_local std::vector<uint32_t> work;
  work.clear();
  work.push_back(n);
  size_t expansions = 0;
  while (!work.empty()) {
    if (++expansions > kMaxExpansionsPerStep)
      throw ConstraintError("the grammar is too ambiguous (its automaton exceeded its state cap)");
    uint32_t cur = work.back();
    work.pop_back();
    const Node node = pool[cur];
    const Element& e = elems_[node.pos];
    switch (e.kind) {
      case Element::kBytesStar: work.push_back(push(pool, node.pos + 1, node.parent)); [[fallthrough]];
      case Element::kBytes: {
        bool dup = false;
        for (uint32_t o : out)
          if (pool[o].pos == node.pos && pool[o].parent == node.parent) dup = true;
        if (!dup) out.push_back(cur);
        break;
      }
      case Element::kRule: {
        uint32_t ret = elems_[node.pos + 1].kind == Element::kEnd ? node.parent : push(pool, node.pos + 1, node.parent);
        for (uint32_t a : alt_starts_[e.arg]) work.push_back(push(pool, a, ret));
        break;
      }
      case Element::kEnd:
        if (node.parent == kRootParent) {
          flags.complete = true;
        } else if (node.parent == kUnknownParent) {
          uint32_t c = continuation_[e.arg];
          if (c == kRootEnd)
            flags.complete = true;
          else if (c == kNoContinuation)
            flags.bottom = true;
          else
            work.push_back(push(pool, c, kUnknownParent));
        } else {
          work.push_back(node.parent);
        }
        break;
    }
  }
}

void Automaton::advance(NodePool& pool, const std::vector<uint32_t>& in, uint8_t byte, std::vector<uint32_t>& out,
                        StepFlags& flags) const {
  for (uint32_t n : in) {
    const Node node = pool[n];
    if (!accepts(node.pos, byte)) continue;
    if (elems_[node.pos].kind == Element::kBytesStar)
      expand(pool, n, out, flags);
    else
      expand(pool, push(pool, node.pos + 1, node.parent), out, flags);
  }
}

}  // namespace gs::structured
