#include "structured/ebnf_grammar.h"

#include <fmt/format.h>

#include <cctype>
#include <map>

#include "structured/constraint_error.h"

namespace gs::structured {

namespace {

class EbnfParser {
 public:
  EbnfParser(GrammarBuilder& b, std::string_view s) : b_(b), s_(s) {}

  void parse() {
    skip();
    while (!at_end()) {
      size_t at = i_;
      std::string name = identifier();
      if (name.empty()) fail(at, "expected a rule name");
      skip();
      if (s_.substr(i_, 3) != "::=") fail(i_, fmt::format("expected '::=' after rule name '{}'", name));
      i_ += 3;
      uint32_t r = rule(name);
      if (defined_.count(name)) fail(at, fmt::format("rule '{}' is defined twice", name));
      defined_[name] = true;
      for (auto& alt : alternatives(0)) b_.add_alternative(r, std::move(alt));
      skip();
    }
    auto it = rules_.find("root");
    if (it == rules_.end() || !defined_.count("root")) throw ConstraintError("the grammar has no 'root' rule");
    b_.set_root(it->second);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) line += s_[k] == '\n';
    throw ConstraintError(fmt::format("grammar line {}: {}", line, what));
  }
  bool at_end() const { return i_ >= s_.size(); }

  void skip() {
    while (!at_end()) {
      if (std::isspace(static_cast<unsigned char>(s_[i_])))
        ++i_;
      else if (s_[i_] == '#')
        while (!at_end() && s_[i_] != '\n') ++i_;
      else
        break;
    }
  }

  std::string identifier() {
    size_t start = i_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '-')) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  uint32_t rule(const std::string& name) {
    auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    uint32_t r = b_.new_rule(name);
    rules_[name] = r;
    return r;
  }

  // Is the text at i_ the start of the next rule (name ::=)?
  bool next_rule_starts() {
    size_t save = i_;
    std::string name = identifier();
    skip();
    bool yes = !name.empty() && s_.substr(i_, 3) == "::=";
    i_ = save;
    return yes;
  }

  std::vector<Sequence> alternatives(int depth) {
    if (depth > b_.limits().max_nesting) fail(i_, "groups nested too deeply");
    std::vector<Sequence> alts{sequence(depth)};
    while (!at_end() && s_[i_] == '|') {
      ++i_;
      alts.push_back(sequence(depth));
    }
    return alts;
  }

  Sequence sequence(int depth) {
    Sequence seq;
    for (;;) {
      skip();
      if (at_end() || s_[i_] == '|' || s_[i_] == ')' || next_rule_starts()) return seq;
      Sequence atom_seq = atom(depth);
      quantify(atom_seq);
      seq.insert(seq.end(), atom_seq.begin(), atom_seq.end());
    }
  }

  void quantify(Sequence& a) {
    if (at_end()) return;
    char c = s_[i_];
    size_t min = 0;
    long max = -1;
    if (c == '*')
      ++i_;
    else if (c == '+')
      min = 1, ++i_;
    else if (c == '?')
      max = 1, ++i_;
    else if (c == '{') {
      ++i_;
      min = count();
      max = static_cast<long>(min);
      if (!at_end() && s_[i_] == ',') {
        ++i_;
        skip();
        max = (!at_end() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ? static_cast<long>(count()) : -1;
      }
      skip();
      if (at_end() || s_[i_] != '}') fail(i_, "unterminated {m,n}");
      ++i_;
    } else {
      return;
    }
    a = {b_.repeat(a, min, max)};
  }

  size_t count() {
    skip();
    size_t n = 0;
    if (at_end() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) fail(i_, "expected a number in {m,n}");
    while (!at_end() && std::isdigit(static_cast<unsigned char>(s_[i_]))) n = n * 10 + (s_[i_++] - '0');
    return n;
  }

  uint32_t escape_or_char(char close) {
    char c = s_[i_++];
    if (c != '\\') {
      if (static_cast<unsigned char>(c) < 0x80) return static_cast<unsigned char>(c);
      // A UTF-8 sequence: decode it.
      unsigned char u = c;
      int extra = u >= 0xF0 ? 3 : u >= 0xE0 ? 2 : 1;
      uint32_t cp = u & (0x3F >> extra);
      for (int k = 0; k < extra && !at_end(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s_[i_++]) & 0x3F);
      return cp;
    }
    if (at_end()) fail(i_, "trailing backslash");
    char e = s_[i_++];
    switch (e) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case '\\': return '\\';
      case '"': return '"';
      case ']': return ']';
      case '[': return '[';
      case '-': return '-';
      case '^': return '^';
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default:
        if (e == close) return static_cast<unsigned char>(e);
        fail(i_, fmt::format("unknown escape '\\{}'", e));
    }
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) fail(i_, "bad hexadecimal escape");
      char h = s_[i_++];
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
    }
    return v;
  }

  static std::string utf8(uint32_t cp) {
    std::string u;
    if (cp < 0x80)
      u += static_cast<char>(cp);
    else if (cp < 0x800)
      u += static_cast<char>(0xC0 | (cp >> 6)), u += static_cast<char>(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
      u += static_cast<char>(0xE0 | (cp >> 12)), u += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
          u += static_cast<char>(0x80 | (cp & 0x3F));
    else
      u += static_cast<char>(0xF0 | (cp >> 18)), u += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
          u += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), u += static_cast<char>(0x80 | (cp & 0x3F));
    return u;
  }

  Sequence any_char() {
    Symbol cont = b_.bytes(byte_range(0x80, 0xBF));
    return {b_.choice({{b_.bytes(byte_range(0, 0x7F))},
                       {b_.bytes(byte_range(0xC2, 0xDF)), cont},
                       {b_.bytes(byte_range(0xE0, 0xEF)), cont, cont},
                       {b_.bytes(byte_range(0xF0, 0xF4)), cont, cont, cont}},
                      "any_char")};
  }

  Sequence atom(int depth) {
    size_t at = i_;
    char c = s_[i_];
    if (c == '"') {
      ++i_;
      std::string lit;
      while (!at_end() && s_[i_] != '"') lit += utf8(escape_or_char('"'));
      if (at_end()) fail(at, "unterminated string literal");
      ++i_;
      return b_.literal(lit);
    }
    if (c == '[') {
      ++i_;
      bool negate = !at_end() && s_[i_] == '^';
      if (negate) ++i_;
      ByteSet set;
      std::vector<Sequence> multibyte;
      while (!at_end() && s_[i_] != ']') {
        uint32_t lo = escape_or_char(']'), hi = lo;
        if (!at_end() && s_[i_] == '-' && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
          ++i_;
          hi = escape_or_char(']');
        }
        if (hi < lo) fail(at, "a character range is reversed");
        if (hi < 0x80)
          set |= byte_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
        else if (lo == hi && !negate)
          multibyte.push_back(b_.literal(utf8(lo)));
        else
          fail(at, "ranges of non-ASCII characters are not supported");
      }
      if (at_end()) fail(at, "missing ']'");
      ++i_;
      if (negate) {
        Sequence any = any_char();
        std::vector<Sequence> alts{{b_.bytes(byte_range(0, 0x7F) & ~set)}};
        Symbol cont = b_.bytes(byte_range(0x80, 0xBF));
        alts.push_back({b_.bytes(byte_range(0xC2, 0xDF)), cont});
        alts.push_back({b_.bytes(byte_range(0xE0, 0xEF)), cont, cont});
        alts.push_back({b_.bytes(byte_range(0xF0, 0xF4)), cont, cont, cont});
        return {b_.choice(std::move(alts), "class")};
      }
      if (multibyte.empty()) {
        if (set.none()) fail(at, "an empty character class");
        return {b_.bytes(set)};
      }
      if (set.any()) multibyte.push_back({b_.bytes(set)});
      return {b_.choice(std::move(multibyte), "class")};
    }
    if (c == '(') {
      ++i_;
      auto alts = alternatives(depth + 1);
      skip();
      if (at_end() || s_[i_] != ')') fail(at, "missing ')'");
      ++i_;
      return {b_.choice(std::move(alts), "group")};
    }
    if (c == '.') {
      ++i_;
      return any_char();
    }
    std::string name = identifier();
    if (name.empty()) fail(at, fmt::format("unexpected character '{}'", c));
    return {GrammarBuilder::ref(rule(name))};
  }

  GrammarBuilder& b_;
  std::string_view s_;
  size_t i_ = 0;
  std::map<std::string, uint32_t> rules_;
  std::map<std::string, bool> defined_;
};

}  // namespace

Grammar ebnf_grammar(std::string_view text, const GrammarLimits& limits) {
  if (text.size() > limits.max_source_bytes) throw ConstraintError("the grammar is too long");
  GrammarBuilder b(limits);
  EbnfParser(b, text).parse();
  return std::move(b).finish();
}

Grammar choice_grammar(const std::vector<std::string>& choices, const GrammarLimits& limits) {
  if (choices.empty()) throw ConstraintError("'choice' must list at least one string");
  GrammarBuilder b(limits);
  uint32_t root = b.new_rule("root");
  for (const auto& c : choices) b.add_alternative(root, b.literal(c));
  b.set_root(root);
  return std::move(b).finish();
}

}  // namespace gs::structured
