// Lexer: template source -> tokens, applying Jinja2's whitespace control as HF configures it
// (trim_blocks, lstrip_blocks, `-`/`+` modifiers, keep_trailing_newline=False, \r\n -> \n).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace gs::jinja {

struct Pos {
  int line = 1;
  int col = 1;
};

enum class Tok {
  Text,        // literal output (already whitespace-controlled)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value is the decoded literal
  Int,
  Float,
  Op,  // operator or punctuation: + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { }
  Eof,
};

struct Token {
  Tok type;
  std::string text;
  Pos pos;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws gs::Error "chat template syntax error at line L, column C: ..." on bad input.
std::vector<Token> lex(std::string_view source, const LexOptions& opts = {});

}  // namespace gs::jinja
