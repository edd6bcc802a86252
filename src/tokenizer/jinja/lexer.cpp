// Implements tokenizer/jinja/lexer.h (Lexer).
#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "tokenizer/jinja/utf8.h"

namespace gs::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string rstrip_ws(std::string_view s) {
  size_t e = s.size();
  while (e > 0 && is_ws(s[e - 1])) --e;
  return std::string(s.substr(0, e));
}

// Operators, longest first so "**" wins over "*".
constexpr std::array<std::string_view, 29> kOps = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/",
                                                   "%",  "~",  "<",  ">",  "=",  ".",  ",", ":", "|", "(",
                                                   ")",  "[",  "]",  "{",  "}",  "!",  ";", "?", "@"};

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& opts) : src_(src), opts_(opts) {
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_open(pos_);
      if (open == std::string_view::npos) {
        emit_text(src_.substr(pos_), pos_);
        break;
      }
      const char kind = src_[open + 1];
      const char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
      std::string_view text = src_.substr(pos_, open - pos_);
      emit_text(control_before(text, kind, mod), pos_);
      pos_ = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#')
        comment(open);
      else
        tag(kind == '{', open);
    }
    tokens_.push_back({Tok::Eof, "", at(src_.size())});
    return std::move(tokens_);
  }

 private:
  Pos at(size_t off) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    const size_t line_start = it == line_starts_.begin() ? 0 : *(it - 1);
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(off - line_start) + 1};
  }

  [[noreturn]] void error(size_t off, const std::string& msg) const {
    const Pos p = at(off);
    fail("chat template syntax error at line {}, column {}: {}", p.line, p.col, msg);
  }

  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string_view::npos;
  }

  // `{%-` strips all whitespace before; lstrip_blocks strips spaces before a block/comment tag
  // that starts its line (unless `{%+`).
  std::string control_before(std::string_view text, char kind, char mod) const {
    if (mod == '-') return rstrip_ws(text);
    if (mod == '+' || kind == '{' || !opts_.lstrip_blocks) return std::string(text);
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return std::string(text);
    for (size_t i = l_pos; i < text.size(); ++i)
      if (!is_ws(text[i])) return std::string(text);
    return std::string(text.substr(0, l_pos));
  }

  // After a tag ends at `pos_`: `-%}` strips all following whitespace; trim_blocks removes one
  // newline after a block/comment tag (unless `+%}`).
  void control_after(char mod, bool is_block) {
    if (mod == '-') {
      while (pos_ < src_.size() && is_ws(src_[pos_])) ++pos_;
    } else if (mod != '+' && is_block && opts_.trim_blocks && pos_ < src_.size()) {
      if (src_[pos_] == '\n')
        ++pos_;
      else if (src_.compare(pos_, 2, "\r\n") == 0)
        pos_ += 2;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void emit_text(const std::string& text, size_t off) {
    if (!text.empty()) tokens_.push_back({Tok::Text, normalize_newlines(text), at(off)});
  }
  void emit_text(std::string_view text, size_t off) { emit_text(std::string(text), off); }

  void comment(size_t open) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) error(open, "unterminated comment (missing '#}')");
    const char mod = end > pos_ && src_[end - 1] == '-' ? '-' : end > pos_ && src_[end - 1] == '+' ? '+' : '\0';
    pos_ = end + 2;
    control_after(mod, true);
  }

  void tag(bool is_var, size_t open) {
    const size_t first = tokens_.size();
    tokens_.push_back({is_var ? Tok::VarBegin : Tok::BlockBegin, "", at(open)});
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_ws(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) error(open, is_var ? "unclosed '{{' (missing '}}')" : "unclosed '{%' (missing '%}')");
      if (depth == 0) {
        const char mod = closer(is_var);
        if (mod != 'x') {
          // `{% raw %}` keeps the newline after it (Jinja2 applies trim_blocks only to endraw).
          const bool is_raw = !is_var && tokens_.size() == first + 2 && tokens_[first + 1].type == Tok::Name &&
                              tokens_[first + 1].text == "raw";
          tokens_.push_back({is_var ? Tok::VarEnd : Tok::BlockEnd, "", at(pos_)});
          pos_ += 2 + (mod != '\0' ? 1 : 0);
          control_after(mod, !is_var && !is_raw);
          break;
        }
      }
      const char c = src_[pos_];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      lex_one();
    }
    if (!is_var && tokens_.size() == first + 3 && tokens_[first + 1].type == Tok::Name &&
        tokens_[first + 1].text == "raw") {
      tokens_.resize(first);
      raw(open);
    }
  }

  // Returns the closer's modifier ('-', '+', '\0') if a closer starts at pos_, else 'x'.
  char closer(bool is_var) const {
    const std::string_view end = is_var ? "}}" : "%}";
    if (src_.compare(pos_, 2, end) == 0) return '\0';
    if (src_.compare(pos_, 1, "-") == 0 && src_.compare(pos_ + 1, 2, end) == 0) return '-';
    if (!is_var && src_.compare(pos_, 1, "+") == 0 && src_.compare(pos_ + 1, 2, end) == 0) return '+';
    return 'x';
  }

  // {% raw %}...{% endraw %}: the body is text, untouched except the endraw tag's whitespace control.
  void raw(size_t open) {
    for (size_t i = src_.find("{%", pos_); i != std::string_view::npos; i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      const char mod = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j++] : '\0';
      while (j < src_.size() && is_ws(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && is_ws(src_[j])) ++j;
      char end_mod = '\0';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) end_mod = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) continue;
      emit_text(control_before(src_.substr(pos_, i - pos_), '%', mod), pos_);
      pos_ = j + 2;
      control_after(end_mod, true);
      return;
    }
    error(open, "missing '{% endraw %}' for this '{% raw %}'");
  }

  void lex_one() {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (is_name_start(c)) {
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back({Tok::Name, std::string(src_.substr(start, pos_ - start)), at(start)});
    } else if (is_digit(c)) {
      number();
    } else if (c == '\'' || c == '"') {
      string_literal();
    } else {
      for (const auto op : kOps) {
        if (src_.compare(pos_, op.size(), op) == 0) {
          pos_ += op.size();
          tokens_.push_back({Tok::Op, std::string(op), at(start)});
          return;
        }
      }
      error(start, fmt::format("unexpected character '{}'", c));
    }
  }

  void digits() {
    while (pos_ < src_.size() &&
           (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1]))))
      ++pos_;
  }

  void number() {
    const size_t start = pos_;
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t j = pos_ + 1;
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
      if (j < src_.size() && is_digit(src_[j])) {
        pos_ = j;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    tokens_.push_back({is_float ? Tok::Float : Tok::Int, text, at(start)});
  }

  void string_literal() {
    const size_t start = pos_;
    const char q = src_[pos_++];
    std::string raw;
    while (true) {
      if (pos_ >= src_.size()) error(start, "unterminated string literal");
      const char c = src_[pos_];
      if (c == q) break;
      if (c == '\\' && pos_ + 1 < src_.size()) {
        raw += c;
        raw += src_[pos_ + 1];
        pos_ += 2;
        continue;
      }
      raw += c;
      ++pos_;
    }
    ++pos_;
    tokens_.push_back({Tok::String, unescape(normalize_newlines(raw), start), at(start)});
  }

  // Python's "unicode-escape" decoding, as Jinja2 applies it to string literals.
  std::string unescape(const std::string& s, size_t off) const {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 >= s.size()) {
        out += s[i];
        continue;
      }
      const char e = s[++i];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x': out_hex(out, s, i, 2, off); break;
        case 'u': out_hex(out, s, i, 4, off); break;
        case 'U': out_hex(out, s, i, 8, off); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = 0;
            size_t k = 0;
            for (; k < 3 && i + k < s.size() && s[i + k] >= '0' && s[i + k] <= '7'; ++k) v = v * 8 + (s[i + k] - '0');
            i += k - 1;
            append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }

  void out_hex(std::string& out, const std::string& s, size_t& i, size_t n, size_t off) const {
    char32_t v = 0;
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) error(off, "truncated \\x/\\u escape in string literal");
      const char h = s[i + k];
      const int d = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (d < 0) error(off, "invalid \\x/\\u escape in string literal");
      v = v * 16 + static_cast<char32_t>(d);
    }
    if (v > 0x10FFFF) error(off, "\\U escape out of Unicode range");
    i += n;
    append_utf8(out, v);
  }

  std::string_view src_;
  LexOptions opts_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& opts) {
  // keep_trailing_newline=False: one trailing newline of the template is dropped.
  if (!source.empty() && source.back() == '\n') {
    source.remove_suffix(1);
    if (!source.empty() && source.back() == '\r') source.remove_suffix(1);
  }
  return Lexer(source, opts).run();
}

}  // namespace gs::jinja
