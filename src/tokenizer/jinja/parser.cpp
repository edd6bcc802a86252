// Parser entry point, token helpers, and statements: text, `{{ }}` output and `{% %}` tags.
// Expressions live in parser_expr.cpp.
#include "tokenizer/jinja/parser.h"

#include "tokenizer/jinja/parser_impl.h"

namespace gs::jinja {
namespace detail {

Body Parser::run() {
  Body body = parse_body({});
  if (cur().type != Tok::Eof) error(cur().pos, fmt::format("unexpected '{}'", cur().text));
  return body;
}

// ---- token helpers ----

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case Tok::VarEnd: return "end of print statement '}}'";
    case Tok::BlockEnd: return "end of statement block '%}'";
    case Tok::Eof: return "end of template";
    case Tok::String: return "string literal";
    default: return "'" + t.text + "'";
  }
}

void Parser::expect_op(std::string_view s) {
  if (!is_op(s)) error(cur().pos, fmt::format("expected '{}', got {}", s, describe(cur())));
  take();
}

std::string Parser::expect_name() {
  if (cur().type != Tok::Name) error(cur().pos, fmt::format("expected a name, got {}", describe(cur())));
  return take().text;
}

void Parser::expect_block_end() {
  if (cur().type != Tok::BlockEnd) error(cur().pos, fmt::format("expected '%}}', got {}", describe(cur())));
  take();
}

// ---- statements ----

Body Parser::parse_body(std::initializer_list<std::string_view> ends) {
  const Nest nest(*this);
  Body body;
  while (cur().type != Tok::Eof) {
    const Token& t = cur();
    if (t.type == Tok::Text) {
      body.push_back({t.pos, stmt::Text{t.text}});
      take();
    } else if (t.type == Tok::VarBegin) {
      take();
      ExprPtr e = parse_tuple();
      if (cur().type != Tok::VarEnd) error(cur().pos, fmt::format("expected '}}}}', got {}", describe(cur())));
      take();
      body.push_back({t.pos, stmt::Output{std::move(e)}});
    } else {  // BlockBegin
      const Token& name = peek();
      if (name.type == Tok::Name && std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
        take();
        return body;
      }
      take();
      body.push_back(parse_statement(t.pos));
    }
  }
  for (const auto end : ends)
    if (end.rfind("end", 0) == 0)
      error(cur().pos, fmt::format("unexpected end of template: missing '{{% {} %}}'", end));
  return body;
}

Body Parser::parse_body_through(std::string_view end) {
  Body body = parse_body({end});
  take();
  expect_block_end();
  return body;
}

Stmt Parser::parse_statement(Pos pos) {
  const Token& kw = cur();
  if (kw.type != Tok::Name) error(kw.pos, fmt::format("expected a statement name, got {}", describe(kw)));
  const std::string name = take().text;
  if (name == "if") return {pos, parse_if()};
  if (name == "for") return {pos, parse_for()};
  if (name == "set") return parse_set(pos);
  if (name == "macro") return {pos, parse_macro()};
  if (name == "filter") return {pos, parse_filter_block()};
  if (name == "generation") {
    expect_block_end();
    return {pos, stmt::Block{parse_body_through("endgeneration")}};
  }
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) error(kw.pos, fmt::format("'{}' outside of a for loop", name));
    expect_block_end();
    if (name == "break") return {pos, stmt::Break{}};
    return {pos, stmt::Continue{}};
  }
  if (name.rfind("end", 0) == 0 || name == "else" || name == "elif")
    error(kw.pos, fmt::format("unexpected '{}': no open block it could close", name));
  error(kw.pos, fmt::format("unknown or unsupported tag '{}'", name));
}

stmt::If Parser::parse_if() {
  stmt::If s;
  ExprPtr cond = parse_tuple();
  expect_block_end();
  while (true) {
    Body body = parse_body({"elif", "else", "endif"});
    s.branches.push_back({std::move(cond), std::move(body)});
    const std::string tag = take().text;
    if (tag == "elif") {
      cond = parse_tuple();
      expect_block_end();
      continue;
    }
    expect_block_end();
    if (tag == "else") s.otherwise = parse_body_through("endif");
    return s;
  }
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  const bool paren = is_op("(");
  if (paren) take();
  names.push_back(expect_name());
  while (is_op(",")) {
    take();
    names.push_back(expect_name());
  }
  if (paren) expect_op(")");
  return names;
}

stmt::For Parser::parse_for() {
  stmt::For s;
  s.targets = parse_targets();
  if (!is_name("in")) error(cur().pos, fmt::format("expected 'in', got {}", describe(cur())));
  take();
  s.iter = parse_tuple(/*with_cond=*/false);
  if (is_name("if")) {
    take();
    s.filter = parse_tuple();
  }
  if (is_name("recursive")) error(cur().pos, "recursive for loops are not supported");
  expect_block_end();
  ++loop_depth_;
  s.body = parse_body({"endfor", "else"});
  --loop_depth_;
  const bool has_else = take().text == "else";
  expect_block_end();
  if (has_else) s.otherwise = parse_body_through("endfor");
  return s;
}

Stmt Parser::parse_set(Pos pos) {
  std::vector<std::string> targets;
  std::string attr;
  targets.push_back(expect_name());
  if (is_op(".")) {
    take();
    attr = expect_name();
  } else {
    while (is_op(",")) {
      take();
      targets.push_back(expect_name());
    }
  }
  if (is_op("=")) {
    take();
    ExprPtr value = parse_tuple();
    expect_block_end();
    return {pos, stmt::Set{std::move(targets), std::move(attr), std::move(value)}};
  }
  if (targets.size() != 1 || !attr.empty()) error(cur().pos, "a block '{% set %}' takes one plain name");
  expect_block_end();
  return {pos, stmt::SetBlock{targets[0], parse_body_through("endset")}};
}

stmt::Macro Parser::parse_macro() {
  stmt::Macro m;
  m.name = expect_name();
  expect_op("(");
  parse_comma_list(")", [&] {
    stmt::Param p{expect_name(), nullptr};
    if (is_op("=")) {
      take();
      p.default_value = parse_expression();
    }
    m.params.push_back(std::move(p));
  });
  expect_block_end();
  const int saved = loop_depth_;
  loop_depth_ = 0;  // `break` inside a macro cannot leave a loop around its call
  m.body = parse_body({"endmacro"});
  loop_depth_ = saved;
  take();
  if (cur().type == Tok::Name) take();  // `{% endmacro name %}`
  expect_block_end();
  return m;
}

stmt::FilterBlock Parser::parse_filter_block() {
  stmt::FilterBlock f;
  f.name = expect_name();
  if (is_op("(")) f.args = parse_call_args();
  expect_block_end();
  f.body = parse_body_through("endfilter");
  return f;
}

}  // namespace detail

Body parse(const std::vector<Token>& tokens) { return detail::Parser(tokens).run(); }

}  // namespace gs::jinja
