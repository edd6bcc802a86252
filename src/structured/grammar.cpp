#include "structured/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "structured/constraint_error.h"

namespace gs::structured {

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(b);
  return s;
}

uint32_t GrammarBuilder::new_rule(std::string name) {
  if (g_.rules.size() >= limits_.max_rules)
    throw ConstraintError(fmt::format("the constraint needs more than {} grammar rules", limits_.max_rules));
  g_.rules.push_back({std::move(name), {}});
  return static_cast<uint32_t>(g_.rules.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, Sequence seq) {
  symbols_ += seq.size() + 1;
  if (symbols_ > limits_.max_symbols)
    throw ConstraintError(fmt::format("the constraint needs more than {} grammar symbols", limits_.max_symbols));
  g_.rules.at(rule).alternatives.push_back(std::move(seq));
}

Symbol GrammarBuilder::bytes(const ByteSet& set) {
  auto it = std::find(g_.byte_sets.begin(), g_.byte_sets.end(), set);
  if (it == g_.byte_sets.end()) {
    g_.byte_sets.push_back(set);
    it = g_.byte_sets.end() - 1;
  }
  return {Symbol::kBytes, static_cast<uint32_t>(it - g_.byte_sets.begin())};
}

Symbol GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Symbol GrammarBuilder::star_of(const ByteSet& set) {
  Symbol s = bytes(set);
  s.kind = Symbol::kBytesStar;
  return s;
}

Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence seq;
  for (unsigned char c : text) seq.push_back(byte(c));
  return seq;
}

Symbol GrammarBuilder::choice(std::vector<Sequence> alternatives, std::string_view name) {
  uint32_t r = new_rule(std::string(name));
  for (auto& a : alternatives) add_alternative(r, std::move(a));
  return ref(r);
}

Symbol GrammarBuilder::repeat(const Sequence& seq, size_t min, long max, std::string_view name) {
  if (min > limits_.max_repetition || (max >= 0 && static_cast<size_t>(max) > limits_.max_repetition))
    throw ConstraintError(fmt::format("a repetition bound above {} is not supported", limits_.max_repetition));
  if (max >= 0 && static_cast<size_t>(max) < min) throw ConstraintError("a repetition's maximum is below its minimum");
  if (max < 0 && min == 0 && seq.size() == 1 && seq[0].kind == Symbol::kBytes) return star_of(g_.byte_sets[seq[0].arg]);
  Sequence tail;  // derives seq{0, max - min}
  if (max < 0 && min > 0) {
    // loop -> seq more, more -> loop | empty: `seq` appears once, so a rule it references
    // returns to one place and the mask cache can follow its end.
    uint32_t loop = new_rule(fmt::format("{}_plus", name));
    uint32_t more = new_rule(fmt::format("{}_more", name));
    Sequence body = seq;
    body.push_back(ref(more));
    add_alternative(loop, std::move(body));
    add_alternative(more, {ref(loop)});
    add_alternative(more, {});
    Sequence all;
    for (size_t i = 1; i < min; ++i) all.insert(all.end(), seq.begin(), seq.end());
    all.push_back(ref(loop));
    uint32_t r = new_rule(std::string(name));
    add_alternative(r, std::move(all));
    return ref(r);
  }
  if (max < 0) {
    uint32_t r = new_rule(fmt::format("{}_star", name));
    Sequence loop = seq;
    loop.push_back(ref(r));
    add_alternative(r, std::move(loop));
    add_alternative(r, {});
    tail.push_back(ref(r));
  } else if (static_cast<size_t>(max) > min) {
    // opt_k -> seq opt_{k-1} | empty, nested so the matcher stays deterministic.
    uint32_t inner = 0;
    for (long k = 0; k < max - static_cast<long>(min); ++k) {
      uint32_t r = new_rule(fmt::format("{}_opt", name));
      Sequence s = seq;
      if (k > 0) s.push_back(ref(inner));
      add_alternative(r, std::move(s));
      add_alternative(r, {});
      inner = r;
    }
    tail.push_back(ref(inner));
  }
  uint32_t r = new_rule(std::string(name));
  Sequence all;
  for (size_t i = 0; i < min; ++i) all.insert(all.end(), seq.begin(), seq.end());
  all.insert(all.end(), tail.begin(), tail.end());
  add_alternative(r, std::move(all));
  return ref(r);
}

namespace {

std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : g.rules[r].alternatives) {
        bool all = std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) {
          return s.kind == Symbol::kBytesStar || (s.kind == Symbol::kRule && nullable[s.arg]);
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// A rule reachable from itself at the left edge would make the automaton's expansion endless.
void check_left_recursion(const Grammar& g) {
  auto nullable = nullable_rules(g);
  std::vector<std::vector<uint32_t>> left(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r)
    for (const auto& alt : g.rules[r].alternatives)
      for (const auto& s : alt) {
        if (s.kind == Symbol::kRule) left[r].push_back(s.arg);
        bool skip = s.kind == Symbol::kBytesStar || (s.kind == Symbol::kRule && nullable[s.arg]);
        if (!skip) break;
      }
  std::vector<uint8_t> color(g.rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t start = 0; start < g.rules.size(); ++start) {
    if (color[start]) continue;
    stack.push_back({start, 0});
    color[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i < left[r].size()) {
        uint32_t next = left[r][i++];
        if (color[next] == 1)
          throw ConstraintError(fmt::format("grammar rule '{}' is left-recursive", g.rules[next].name));
        if (color[next] == 0) {
          color[next] = 1;
          stack.push_back({next, 0});
        }
      } else {
        color[r] = 2;
        stack.pop_back();
      }
    }
  }
}

}  // namespace

Grammar GrammarBuilder::finish() && {
  if (g_.rules.empty()) throw ConstraintError("the grammar has no rules");
  for (const auto& r : g_.rules)
    if (r.alternatives.empty())
      throw ConstraintError(fmt::format("grammar rule '{}' is used but never defined", r.name));
  check_left_recursion(g_);
  return std::move(g_);
}

namespace {

std::string set_text(const ByteSet& s) {
  if (s.count() == 1)
    for (int b = 0; b < 256; ++b)
      if (s.test(b))
        return (b >= 0x20 && b < 0x7f && b != '"' && b != '\\') ? fmt::format("\"{}\"", char(b))
                                                                : fmt::format("[\\x{:02x}]", b);
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.test(b)) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.test(e + 1)) ++e;
    auto one = [](int c) {
      return (c > 0x20 && c < 0x7f && c != ']' && c != '\\' && c != '-') ? std::string(1, char(c))
                                                                         : fmt::format("\\x{:02x}", c);
    };
    out += one(b);
    if (e > b) out += "-" + one(e);
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string to_string(const Grammar& g) {
  std::string out;
  for (size_t r = 0; r < g.rules.size(); ++r) {
    out += fmt::format("{}{}_{} ::=", r == g.root ? "root=" : "", g.rules[r].name, r);
    for (size_t a = 0; a < g.rules[r].alternatives.size(); ++a) {
      if (a) out += " |";
      for (const auto& s : g.rules[r].alternatives[a]) {
        if (s.kind == Symbol::kRule)
          out += fmt::format(" {}_{}", g.rules[s.arg].name, s.arg);
        else
          out += " " + set_text(g.byte_sets[s.arg]) + (s.kind == Symbol::kBytesStar ? "*" : "");
      }
      if (g.rules[r].alternatives[a].empty()) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace gs::structured
