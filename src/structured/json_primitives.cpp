#include "structured/json_primitives.h"

#include <fmt/format.h>

#include <string>

#include "structured/constraint_error.h"
#include "structured/regex_grammar.h"

namespace gs::structured {

namespace {
Sequence cat(Sequence a, const Sequence& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

JsonPrimitives::JsonPrimitives(GrammarBuilder& b, bool any_whitespace) : b_(b) {
  if (any_whitespace) {
    ByteSet s;
    for (char c : std::string_view(" \t\n")) s.set(static_cast<uint8_t>(c));
    ws_ = {b_.star_of(s)};
  }
}

Sequence JsonPrimitives::comma() const { return cat(cat(ws_, {b_.byte(',')}), ws_); }
Sequence JsonPrimitives::colon() const { return cat(cat(ws_, {b_.byte(':')}), ws_); }

ByteSet JsonPrimitives::plain_chars() {
  ByteSet s = byte_range(0x20, 0xFF);
  s.reset('"');
  s.reset('\\');
  return s;
}

// Each use gets its own rules (no memo): a rule used in one place lets the mask cache follow
// its end into the enclosing rule, so tokens that close a string stay context-independent.
Symbol JsonPrimitives::string() {
  ByteSet ascii = plain_chars() & byte_range(0, 0x7F);
  Symbol plain = b_.star_of(ascii);
  Symbol hex = b_.bytes(byte_range('0', '9') | byte_range('a', 'f') | byte_range('A', 'F'));
  Symbol cont = b_.bytes(byte_range(0x80, 0xBF));
  // Runs of ASCII stay one byte-class star; escapes and multi-byte characters (well-formed
  // UTF-8 only, so a detokenized output always parses) separate them.
  Symbol other = b_.choice(
      {{b_.byte('\\'), b_.bytes(ByteSet().set('"').set('\\').set('/').set('b').set('f').set('n').set('r').set('t'))},
       {b_.byte('\\'), b_.byte('u'), hex, hex, hex, hex},
       {b_.bytes(byte_range(0xC2, 0xDF)), cont},
       {b_.bytes(byte_range(0xE0, 0xEF)), cont, cont},
       {b_.bytes(byte_range(0xF0, 0xF4)), cont, cont, cont}},
      "escape_or_utf8");
  return b_.choice({{b_.byte('"'), plain, b_.star({other, plain}), b_.byte('"')}}, "string");
}

// A chain of rules, one per character still allowed, each listing the character's forms
// inline and naming the next link in tail position: every link is used in one place, so the
// mask cache follows a character's end into the next one (a shared character rule would leave
// most of the vocabulary to be checked per step).
Symbol JsonPrimitives::string_length(size_t min, long max) {
  if (min == 0 && max < 0) return string();
  if (min > b_.limits().max_repetition || (max >= 0 && static_cast<size_t>(max) > b_.limits().max_repetition))
    throw ConstraintError(fmt::format("a string length bound above {} is not supported", b_.limits().max_repetition));
  if (max >= 0 && static_cast<size_t>(max) < min) throw ConstraintError("a string's maxLength is below its minLength");
  Symbol cont = b_.bytes(byte_range(0x80, 0xBF));
  Symbol hex = b_.bytes(byte_range('0', '9') | byte_range('a', 'f') | byte_range('A', 'F'));
  const std::vector<Sequence> forms = {
      {b_.bytes(plain_chars() & byte_range(0, 0x7F))},
      {b_.bytes(byte_range(0xC2, 0xDF)), cont},
      {b_.bytes(byte_range(0xE0, 0xEF)), cont, cont},
      {b_.bytes(byte_range(0xF0, 0xF4)), cont, cont, cont},
      {b_.byte('\\'), b_.bytes(ByteSet().set('"').set('\\').set('/').set('b').set('f').set('n').set('r').set('t'))},
      {b_.byte('\\'), b_.byte('u'), hex, hex, hex, hex}};
  auto link = [&](std::optional<Symbol> next, bool optional) {
    uint32_t r = b_.new_rule("chars");
    for (Sequence f : forms) {
      if (next) f.push_back(*next);
      b_.add_alternative(r, std::move(f));
    }
    if (optional) b_.add_alternative(r, {});
    return GrammarBuilder::ref(r);
  };
  std::optional<Symbol> tail;  // the characters past min
  if (max < 0) {
    uint32_t loop = b_.new_rule("chars_star");
    for (Sequence f : forms) {
      f.push_back(GrammarBuilder::ref(loop));
      b_.add_alternative(loop, std::move(f));
    }
    b_.add_alternative(loop, {});
    tail = GrammarBuilder::ref(loop);
  } else {
    for (long k = 0; k < max - static_cast<long>(min); ++k) tail = link(tail, true);
  }
  std::optional<Symbol> chain = tail;
  for (size_t k = 0; k < min; ++k) chain = link(chain, false);
  Sequence seq{b_.byte('"')};
  if (chain) seq.push_back(*chain);
  seq.push_back(b_.byte('"'));
  return b_.choice({seq}, "string");
}

Symbol JsonPrimitives::string_pattern(std::string_view regex) {
  ByteSet allowed = plain_chars();
  uint32_t r = add_regex_rule(b_, regex, &allowed, "pattern");
  return b_.choice({{b_.byte('"'), GrammarBuilder::ref(r), b_.byte('"')}}, "string");
}

Symbol JsonPrimitives::digits(size_t n) {
  return b_.repeat({b_.bytes(byte_range('0', '9'))}, n, static_cast<long>(n), "digits");
}

// Equal-length decimal strings lo <= hi: the classic range-to-pattern split.
std::vector<Sequence> JsonPrimitives::same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return {{}};
  const size_t n = lo.size();
  if (lo[0] == hi[0]) {
    auto rest = same_length(lo.substr(1), hi.substr(1));
    return {{b_.byte(lo[0]), b_.choice(std::move(rest), "digits")}};
  }
  bool lo_zeros = lo.find_first_not_of('0', 1) == std::string::npos;
  bool hi_nines = hi.find_first_not_of('9', 1) == std::string::npos;
  std::vector<Sequence> out;
  char from = lo[0], to = hi[0];
  if (!lo_zeros) {
    out.push_back({b_.byte(lo[0]), b_.choice(same_length(lo.substr(1), std::string(n - 1, '9')), "digits")});
    ++from;
  }
  if (!hi_nines) --to;
  if (from <= to) out.push_back({b_.bytes(byte_range(from, to)), digits(n - 1)});
  if (!hi_nines)
    out.push_back({b_.byte(hi[0]), b_.choice(same_length(std::string(n - 1, '0'), hi.substr(1)), "digits")});
  return out;
}

// Non-negative integers in [a, b] (b empty: unbounded), without leading zeros.
std::vector<Sequence> JsonPrimitives::nonneg(int64_t a, std::optional<int64_t> b) {
  std::vector<Sequence> out;
  const size_t len_a = std::to_string(a).size();
  const size_t len_b = b ? std::to_string(*b).size() : len_a;
  int64_t pow = 1;
  for (size_t k = 1; k < len_a; ++k) pow *= 10;
  for (size_t n = len_a; n <= len_b; ++n, pow *= 10) {
    int64_t lo = std::max<int64_t>(a, n == 1 ? 0 : pow);
    int64_t hi = pow * 10 - 1;
    if (b) hi = std::min(hi, *b);
    if (lo > hi) continue;
    for (auto& s : same_length(std::to_string(lo), std::to_string(hi))) out.push_back(std::move(s));
  }
  if (!b)  // every longer number
    out.push_back({b_.bytes(byte_range('1', '9')), digits(len_a), b_.star_of(byte_range('0', '9'))});
  return out;
}

Symbol JsonPrimitives::integer(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  constexpr int64_t kMax = 100000000000000000LL;
  if ((lo && (*lo > kMax || *lo < -kMax)) || (hi && (*hi > kMax || *hi < -kMax)))
    throw ConstraintError("integer bounds beyond 1e17 are not supported");
  if (lo && hi && *lo > *hi) throw ConstraintError("the integer's minimum is above its maximum");
  std::vector<Sequence> alts;
  if (!hi || *hi >= 0)
    for (auto& s : nonneg(lo ? std::max<int64_t>(*lo, 0) : 0, hi)) alts.push_back(std::move(s));
  if (!lo || *lo < 0) {  // -x for x in [max(1, -hi), -lo]
    int64_t a = (hi && *hi < 0) ? -*hi : 1;
    std::optional<int64_t> b;
    if (lo) b = -*lo;
    Symbol mag = b_.choice(nonneg(a, b), "magnitude");
    alts.push_back({b_.byte('-'), mag});
  }
  return b_.choice(std::move(alts), "integer");
}

Symbol JsonPrimitives::fraction_exponent() {
  Symbol digit = b_.bytes(byte_range('0', '9'));
  Symbol frac = b_.optional({b_.byte('.'), digit, b_.star_of(byte_range('0', '9'))});
  // At most two exponent digits: every such number is a finite double.
  Symbol exp = b_.optional({b_.bytes(ByteSet().set('e').set('E')), b_.optional({b_.bytes(ByteSet().set('+').set('-'))}),
                            digit, b_.optional({digit})});
  return b_.choice({{frac, exp}}, "frac_exp");
}

Symbol JsonPrimitives::number(bool allow_negative) {
  Symbol int_part =
      b_.choice({{b_.byte('0')}, {b_.bytes(byte_range('1', '9')), b_.star_of(byte_range('0', '9'))}}, "int");
  Sequence seq;
  if (allow_negative) seq.push_back(b_.optional({b_.byte('-')}));
  seq.push_back(int_part);
  seq.push_back(fraction_exponent());
  return b_.choice({seq}, "number");
}

// With m = I.F (integer part I, fraction F): m >= L iff I >= L; m > L iff I > L, or I = L
// with a fraction that is not all zeros; m < H iff I < H; m <= H iff I < H, or I = H with an
// all-zero fraction. So: I in [a, b] with any fraction, plus the two boundary cases.
std::vector<Sequence> JsonPrimitives::magnitude_in(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  const Symbol digit = b_.bytes(byte_range('0', '9'));
  const int64_t a = lo ? (lo->exclusive ? lo->value + 1 : lo->value) : 0;
  std::optional<int64_t> b;
  if (hi) b = hi->value - 1;
  std::vector<Sequence> out;
  if (!b || a <= *b)
    out.push_back(
        {b_.choice(nonneg(a, b), "int"), b_.optional({b_.byte('.'), digit, b_.star_of(byte_range('0', '9'))})});
  if (lo && lo->exclusive && (!hi || lo->value < hi->value)) {
    Sequence s = b_.literal(std::to_string(lo->value));
    for (Symbol x : {b_.byte('.'), b_.star_of(ByteSet().set('0')), b_.bytes(byte_range('1', '9')),
                     b_.star_of(byte_range('0', '9'))})
      s.push_back(x);
    out.push_back(std::move(s));
  }
  if (hi && !hi->exclusive && (!lo || hi->value > lo->value || (hi->value == lo->value && !lo->exclusive))) {
    Sequence s = b_.literal(std::to_string(hi->value));
    s.push_back(b_.optional({b_.byte('.'), b_.byte('0'), b_.star_of(ByteSet().set('0'))}));
    out.push_back(std::move(s));
  }
  return out;
}

Symbol JsonPrimitives::number_in(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  constexpr int64_t kMax = 100000000000000000LL;
  for (const auto& bound : {lo, hi})
    if (bound && (bound->value > kMax || bound->value < -kMax))
      throw ConstraintError("numeric bounds beyond 1e17 are not supported");
  std::vector<Sequence> alts;
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {  // x >= 0
    std::optional<NumberBound> mlo;
    if (lo && lo->value >= 0) mlo = lo;
    for (auto& s : magnitude_in(mlo, hi)) alts.push_back(std::move(s));
  }
  if (!lo || lo->value < 0) {  // x = -m, m > 0: x >= lo iff m <= -lo, x <= hi iff m >= -hi
    std::optional<NumberBound> mhi;
    if (lo) mhi = NumberBound{-lo->value, lo->exclusive};
    NumberBound mlo{0, true};
    if (hi && hi->value < 0) mlo = {-hi->value, hi->exclusive};
    auto neg = magnitude_in(mlo, mhi);
    if (!neg.empty()) alts.push_back({b_.byte('-'), b_.choice(std::move(neg), "magnitude")});
  }
  if (alts.empty()) throw ConstraintError("no number lies within the bounds");
  return b_.choice(std::move(alts), "number");
}

Symbol JsonPrimitives::any_value() {
  if (any_value_) return *any_value_;
  uint32_t value = b_.new_rule("value");
  any_value_ = GrammarBuilder::ref(value);
  uint32_t object = b_.new_rule("object");
  uint32_t array = b_.new_rule("array");
  any_object_ = GrammarBuilder::ref(object);
  Sequence member = cat(cat({string()}, colon()), {*any_value_});
  Sequence more = cat(comma(), member);
  b_.add_alternative(object, cat(cat(cat({b_.byte('{')}, ws_), {b_.optional(cat(member, {b_.star(more)}))}),
                                 cat(ws_, {b_.byte('}')})));
  Sequence more_values = cat(comma(), {*any_value_});
  b_.add_alternative(array, cat(cat(cat({b_.byte('[')}, ws_), {b_.optional({*any_value_, b_.star(more_values)})}),
                                cat(ws_, {b_.byte(']')})));
  b_.add_alternative(value, {GrammarBuilder::ref(object)});
  b_.add_alternative(value, {GrammarBuilder::ref(array)});
  b_.add_alternative(value, {string()});
  b_.add_alternative(value, {number(true)});
  b_.add_alternative(value, b_.literal("true"));
  b_.add_alternative(value, b_.literal("false"));
  b_.add_alternative(value, b_.literal("null"));
  return *any_value_;
}

Symbol JsonPrimitives::any_object() {
  any_value();
  return *any_object_;
}

}  // namespace gs::structured
