#include "structured/regex_grammar.h"

#include <fmt/format.h>

#include "structured/constraint_error.h"

namespace gs::structured {

namespace {

ByteSet digit_set() { return byte_range('0', '9'); }
ByteSet word_set() { return byte_range('a', 'z') | byte_range('A', 'Z') | digit_set() | byte_range('_', '_'); }
ByteSet space_set() {
  ByteSet s;
  for (char c : std::string_view(" \t\n\r\f\v")) s.set(static_cast<uint8_t>(c));
  return s;
}

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view src, const ByteSet* allowed) : b_(b), s_(src), allowed_(allowed) {}

  uint32_t parse(std::string_view name) {
    if (!s_.empty() && s_.front() == '^') ++i_;
    uint32_t r = b_.new_rule(std::string(name));
    for (auto& alt : alternatives(0)) b_.add_alternative(r, std::move(alt));
    if (i_ < s_.size()) fail(fmt::format("unbalanced ')' at offset {}", i_));
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConstraintError(fmt::format("regex '{}': {}", s_, what));
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }

  std::vector<Sequence> alternatives(int depth) {
    if (depth > b_.limits().max_nesting) fail("groups nested too deeply");
    std::vector<Sequence> alts;
    alts.push_back(sequence(depth));
    while (!at_end() && peek() == '|') {
      ++i_;
      alts.push_back(sequence(depth));
    }
    return alts;
  }

  Sequence sequence(int depth) {
    Sequence seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && i_ + 1 == s_.size()) {
        ++i_;
        break;
      }
      Sequence atom_seq = atom(depth);
      quantify(atom_seq);
      seq.insert(seq.end(), atom_seq.begin(), atom_seq.end());
    }
    return seq;
  }

  // A class's ASCII bytes, and any well-formed multi-byte character if it holds bytes >= 0x80
  // (negated classes and `.`).
  Symbol set_symbol(ByteSet set) {
    if (allowed_) set &= *allowed_;
    if (set.none()) fail("a character class matches no allowed character");
    ByteSet ascii = set & byte_range(0, 0x7F);
    if ((set & byte_range(0x80, 0xFF)).none()) return b_.bytes(ascii);
    Symbol cont = b_.bytes(byte_range(0x80, 0xBF));
    std::vector<Sequence> alts{{b_.bytes(byte_range(0xC2, 0xDF)), cont},
                               {b_.bytes(byte_range(0xE0, 0xEF)), cont, cont},
                               {b_.bytes(byte_range(0xF0, 0xF4)), cont, cont, cont}};
    if (ascii.any()) alts.push_back({b_.bytes(ascii)});
    return b_.choice(std::move(alts), "char");
  }

  void quantify(Sequence& atom_seq) {
    if (at_end()) return;
    size_t min = 0;
    long max = -1;
    char c = peek();
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      min = 1, ++i_;
    } else if (c == '?') {
      max = 1, ++i_;
    } else if (c == '{' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
      ++i_;
      min = number();
      max = static_cast<long>(min);
      if (!at_end() && peek() == ',') {
        ++i_;
        max = (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) ? static_cast<long>(number()) : -1;
      }
      if (at_end() || peek() != '}') fail("unterminated {m,n}");
      ++i_;
    } else {
      return;
    }
    if (!at_end() && (peek() == '?' || peek() == '+')) ++i_;  // lazy / possessive: same language
    atom_seq = {b_.repeat(atom_seq, min, max)};
  }

  size_t number() {
    size_t n = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) {
      n = n * 10 + (peek() - '0');
      if (n > 100000) fail("repetition count too large");
      ++i_;
    }
    return n;
  }

  Sequence atom(int depth) {
    char c = s_[i_++];
    switch (c) {
      case '(': {
        if (!at_end() && peek() == '?') {
          if (i_ + 1 < s_.size() && s_[i_ + 1] == ':')
            i_ += 2;
          else
            fail("lookaround and named groups are not supported");
        }
        auto alts = alternatives(depth + 1);
        if (at_end() || peek() != ')') fail("missing ')'");
        ++i_;
        return {b_.choice(std::move(alts), "group")};
      }
      case '.': {
        ByteSet s;
        s.set();
        s.reset('\n');
        return {set_symbol(s)};
      }
      case '[': return {set_symbol(bracket())};
      case '\\': return escape_atom();
      case '*':
      case '+':
      case '?': fail(fmt::format("nothing to repeat before '{}'", c));
      case '^': fail("'^' inside the pattern is not supported");
      case '$': fail("'$' inside the pattern is not supported");
      default: return literal_byte(static_cast<uint8_t>(c));
    }
  }

  Sequence literal_byte(uint8_t c) {
    ByteSet s;
    s.set(c);
    return {set_symbol(s)};
  }

  Sequence code_point(uint32_t cp) {
    std::string u;
    if (cp < 0x80) {
      u += static_cast<char>(cp);
    } else if (cp < 0x800) {
      u += static_cast<char>(0xC0 | (cp >> 6)), u += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      u += static_cast<char>(0xE0 | (cp >> 12)), u += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      u += static_cast<char>(0x80 | (cp & 0x3F));
    }
    Sequence seq;
    for (unsigned char ch : u) seq.push_back(b_.byte(ch));
    return seq;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek()))) fail("bad hexadecimal escape");
      char h = s_[i_++];
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
    }
    return v;
  }

  // An escape inside or outside a class: a set, or a single code point in `cp`.
  bool escape(ByteSet& set, uint32_t& cp) {
    if (at_end()) fail("trailing backslash");
    char c = s_[i_++];
    switch (c) {
      case 'd': set = digit_set(); return true;
      case 'D': set = ~digit_set(); return true;
      case 'w': set = word_set(); return true;
      case 'W': set = ~word_set(); return true;
      case 's': set = space_set(); return true;
      case 'S': set = ~space_set(); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': cp = hex(2); return false;
      case 'u': cp = hex(4); return false;
      case 'b':
      case 'B': fail("word boundaries are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(c))) fail("backreferences are not supported");
        if (std::isalpha(static_cast<unsigned char>(c))) fail(fmt::format("unknown escape '\\{}'", c));
        cp = static_cast<uint8_t>(c);
        return false;
    }
  }

  Sequence escape_atom() {
    ByteSet set;
    uint32_t cp = 0;
    if (escape(set, cp)) return {set_symbol(set)};
    return cp < 0x100 && cp < 0x80 ? literal_byte(static_cast<uint8_t>(cp)) : code_point(cp);
  }

  ByteSet bracket() {
    bool negate = !at_end() && peek() == '^';
    if (negate) ++i_;
    ByteSet set;
    bool first = true;
    while (!at_end() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (!class_char(set, lo)) continue;
      if (i_ + 1 < s_.size() && peek() == '-' && s_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = 0;
        ByteSet ignored;
        if (!class_char(ignored, hi)) fail("a class escape cannot end a range");
        if (hi < lo) fail("a character range is reversed");
        if (hi >= 0x80) fail("ranges of non-ASCII characters are not supported");
        set |= byte_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
      } else {
        if (lo >= 0x80) fail("non-ASCII characters inside [...] are not supported");
        set.set(lo);
      }
    }
    if (at_end()) fail("missing ']'");
    ++i_;
    if (negate) set = ~set;  // includes every byte >= 0x80: any non-ASCII character
    return set;
  }

  // One class member: false when it was a set escape (merged into `set`).
  bool class_char(ByteSet& set, uint32_t& cp) {
    char c = s_[i_++];
    if (c != '\\') {
      cp = static_cast<uint8_t>(c);
      if (cp >= 0x80) fail("non-ASCII characters inside [...] are not supported");
      return true;
    }
    ByteSet esc;
    if (escape(esc, cp)) {
      set |= esc;
      return false;
    }
    return true;
  }

  GrammarBuilder& b_;
  std::string_view s_;
  const ByteSet* allowed_;
  size_t i_ = 0;
};

}  // namespace

uint32_t add_regex_rule(GrammarBuilder& b, std::string_view regex, const ByteSet* allowed, std::string_view name) {
  if (regex.size() > b.limits().max_source_bytes) throw ConstraintError("the regex is too long");
  return RegexParser(b, regex, allowed).parse(name);
}

Grammar regex_grammar(std::string_view regex, const GrammarLimits& limits) {
  GrammarBuilder b(limits);
  b.set_root(add_regex_rule(b, regex));
  return std::move(b).finish();
}

}  // namespace gs::structured
