// Automaton: a Grammar laid out flat for the pushdown matcher, and its byte-level steps.
//
// Every alternative is a run of elements ending in an End element; a position is an index into
// that run. A stack is a persistent linked list of nodes in a NodePool: the top node's position
// is where the parse is, each parent's position is where its rule resumes (so stacks share
// their tails). A reference in tail position pushes no frame. Expansion (closure) turns a node
// into the scanning nodes it reaches: nodes whose position is a byte class or byte-class star.
//
// For the token-mask cache a stack may sit on an unknown bottom: when its rule ends, the parse
// continues at the rule's unique continuation if the grammar fixes one (the rule is used in one
// place), otherwise the step reports that it needs the real stack (`bottom`).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "structured/grammar.h"

namespace gs::structured {

constexpr uint32_t kRootParent = 0xFFFFFFFFu;
constexpr uint32_t kUnknownParent = 0xFFFFFFFEu;

struct Element {
  enum Kind : uint8_t { kBytes, kBytesStar, kRule, kEnd };
  Kind kind = kEnd;
  uint32_t arg = 0;  // byte-set index; rule id (kRule, kEnd)
};

struct Node {
  uint32_t pos = 0;
  uint32_t parent = kRootParent;
};

using NodePool = std::vector<Node>;

// What an expansion reached besides scanning nodes.
struct StepFlags {
  bool complete = false;  // the root rule can end here
  bool bottom = false;    // a rule ended over the unknown bottom with no fixed continuation
};

class Automaton {
 public:
  explicit Automaton(const Grammar& g);

  // The scanning nodes of a fresh parse (root's alternatives over the root parent).
  void start(NodePool& pool, std::vector<uint32_t>& out, StepFlags& flags) const;
  // Expands node `n` into `out` (deduplicated by position and parent).
  void expand(NodePool& pool, uint32_t n, std::vector<uint32_t>& out, StepFlags& flags) const;
  // Consumes one byte from every scanning node of `in`; the reached scanning nodes go to `out`.
  void advance(NodePool& pool, const std::vector<uint32_t>& in, uint8_t byte, std::vector<uint32_t>& out,
               StepFlags& flags) const;

  size_t num_positions() const { return elems_.size(); }
  bool is_scanning(uint32_t pos) const { return elems_[pos].kind <= Element::kBytesStar; }
  bool accepts(uint32_t pos, uint8_t b) const { return (sets_[elems_[pos].arg][b >> 6] >> (b & 63)) & 1; }

 private:
  static constexpr uint32_t kNoContinuation = 0xFFFFFFFFu;
  static constexpr uint32_t kRootEnd = 0xFFFFFFFEu;
  uint32_t push(NodePool& pool, uint32_t pos, uint32_t parent) const;

  std::vector<Element> elems_;
  std::vector<std::vector<uint32_t>> alt_starts_;  // per rule
  std::vector<std::array<uint64_t, 4>> sets_;
  std::vector<uint32_t> continuation_;  // per rule: a position, kRootEnd or kNoContinuation
  uint32_t root_ = 0;
};

}  // namespace gs::structured
