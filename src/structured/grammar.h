// Grammar: the one form every constraint compiles into (JSON Schema, regex, choice, EBNF).
//
// A byte-level context-free grammar: rules whose alternatives are sequences of symbols, each
// symbol a byte class (one byte of a set), a byte-class star (any run of bytes of a set) or a
// reference to a rule. Repetition, options and groups are auxiliary rules (GrammarBuilder
// makes them). The matcher (matcher.h) runs a grammar as a pushdown automaton over bytes.
#pragma once
#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gs::structured {

using ByteSet = std::bitset<256>;

struct Symbol {
  enum Kind : uint8_t { kBytes, kBytesStar, kRule };
  Kind kind = kBytes;
  uint32_t arg = 0;  // byte-set index for kBytes / kBytesStar, rule id for kRule
};
using Sequence = std::vector<Symbol>;

struct Rule {
  std::string name;
  std::vector<Sequence> alternatives;  // an empty sequence derives the empty string
};

struct Grammar {
  std::vector<Rule> rules;
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;
};

// Caps that keep a pathological constraint from reaching the engine (each gives a
// ConstraintError).
struct GrammarLimits {
  size_t max_rules = 50000;
  size_t max_symbols = 400000;
  int max_nesting = 64;          // schema / regex / EBNF group nesting
  size_t max_repetition = 2000;  // the largest {n,m} bound expanded
  size_t max_source_bytes = 1 << 20;
  size_t max_eager_positions = 4000;  // GrammarCompiler builds the whole mask cache up to this size
};

// Builds a Grammar: rules, deduplicated byte sets and the auxiliary rules of repetition.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}

  uint32_t new_rule(std::string name);  // a rule with no alternatives yet
  void add_alternative(uint32_t rule, Sequence seq);
  void set_root(uint32_t rule) { g_.root = rule; }
  const GrammarLimits& limits() const { return limits_; }

  Symbol bytes(const ByteSet& set);
  Symbol byte(uint8_t b);
  Symbol star_of(const ByteSet& set);
  static Symbol ref(uint32_t rule) { return {Symbol::kRule, rule}; }
  Sequence literal(std::string_view text);
  // A rule deriving any of `alternatives` (a group).
  Symbol choice(std::vector<Sequence> alternatives, std::string_view name = "group");
  // seq{min,max}; max < 0: unbounded.
  Symbol repeat(const Sequence& seq, size_t min, long max, std::string_view name = "rep");
  Symbol optional(const Sequence& seq) { return repeat(seq, 0, 1, "opt"); }
  Symbol star(const Sequence& seq) { return repeat(seq, 0, -1, "star"); }

  // Checks the caps, rules without alternatives and left recursion; throws ConstraintError.
  Grammar finish() &&;

 private:
  GrammarLimits limits_;
  Grammar g_;
  size_t symbols_ = 0;
};

ByteSet byte_range(uint8_t lo, uint8_t hi);

// Text form of a grammar (GBNF-like), for errors and tests.
std::string to_string(const Grammar& g);

}  // namespace gs::structured
