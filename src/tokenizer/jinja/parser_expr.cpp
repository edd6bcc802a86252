// Parser, expressions: Jinja2's precedence levels (loosest first: `x if c else y`, or, and, not,
// comparisons and `in`, + -, ~, * / // %, **, unary - +, then filters/tests), primaries
// (names, literals, tuples, lists, dicts) and postfix `.attr`, `[index/slice]`, `(call)`.
#include <cctype>
#include <cstdint>

#include "tokenizer/jinja/parser_impl.h"

namespace gs::jinja::detail {

int depth_of(const ArgExprs& a) {
  int d = 0;
  for (const auto& e : a.args) d = std::max(d, e->depth);
  for (const auto& [k, e] : a.kwargs) d = std::max(d, e->depth);
  return d;
}

ExprPtr Parser::parse_tuple(bool with_cond) {
  const Pos pos = cur().pos;
  ExprPtr first = parse_expression(with_cond);
  if (!is_op(",")) return first;
  return parse_tuple_rest(pos, std::move(first), with_cond, /*in_parens=*/false);
}

ExprPtr Parser::parse_tuple_rest(Pos pos, ExprPtr first, bool with_cond, bool in_parens) {
  expr::ListLit items;
  int d = first->depth;
  items.items.push_back(std::move(first));
  while (is_op(",")) {
    take();
    const bool closed =
        in_parens ? is_op(")") : cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd || is_name("in");
    if (closed) break;
    items.items.push_back(parse_expression(with_cond));
    d = std::max(d, items.items.back()->depth);
  }
  return mk(pos, std::move(items), d);
}

ExprPtr Parser::parse_expression(bool with_cond) {
  const Nest nest(*this);
  ExprPtr e = parse_or();
  if (!with_cond) return e;
  while (is_name("if")) {
    const Pos pos = take().pos;
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (is_name("else")) {
      take();
      otherwise = parse_expression();
    }
    int d = std::max(e->depth, cond->depth);
    if (otherwise) d = std::max(d, otherwise->depth);
    e = mk(pos, expr::Cond{std::move(cond), std::move(e), std::move(otherwise)}, d);
  }
  return e;
}

// ---- binary operators ----

std::string Parser::take_binary_op(std::initializer_list<std::string_view> ops) {
  for (const std::string_view op : ops) {
    if (op == "not in") {
      if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        take();
        take();
        return std::string(op);
      }
    } else if (std::isalpha(static_cast<unsigned char>(op[0])) ? is_name(op) : is_op(op)) {
      return take().text;
    }
  }
  return "";
}

ExprPtr Parser::parse_left_assoc(ExprPtr (Parser::*operand)(), std::initializer_list<std::string_view> ops) {
  ExprPtr e = (this->*operand)();
  while (true) {
    const Pos pos = cur().pos;
    std::string op = take_binary_op(ops);
    if (op.empty()) return e;
    ExprPtr rhs = (this->*operand)();
    const int d = std::max(e->depth, rhs->depth);
    e = mk(pos, expr::Binary{std::move(op), std::move(e), std::move(rhs)}, d);
  }
}

ExprPtr Parser::parse_or() { return parse_left_assoc(&Parser::parse_and, {"or"}); }
ExprPtr Parser::parse_and() { return parse_left_assoc(&Parser::parse_not, {"and"}); }

ExprPtr Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  const Nest nest(*this);
  const Pos pos = take().pos;
  ExprPtr operand = parse_not();
  const int d = operand->depth;
  return mk(pos, expr::Unary{"not", std::move(operand)}, d);
}

ExprPtr Parser::parse_compare() {
  return parse_left_assoc(&Parser::parse_math1, {"==", "!=", "<", "<=", ">", ">=", "in", "not in"});
}
ExprPtr Parser::parse_math1() { return parse_left_assoc(&Parser::parse_concat, {"+", "-"}); }
ExprPtr Parser::parse_concat() { return parse_left_assoc(&Parser::parse_math2, {"~"}); }
ExprPtr Parser::parse_math2() { return parse_left_assoc(&Parser::parse_pow, {"*", "/", "//", "%"}); }
ExprPtr Parser::parse_pow() { return parse_left_assoc(&Parser::parse_filtered_unary, {"**"}); }

// ---- unary, primaries ----

// As in Jinja2, a sign's operand takes no filters: `-x|abs` is `(-x)|abs`.
ExprPtr Parser::parse_unary(bool with_filter) {
  const Nest nest(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Token& t = take();
    ExprPtr operand = parse_unary(false);
    const int d = operand->depth;
    e = mk(t.pos, expr::Unary{t.text, std::move(operand)}, d);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filters(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  switch (t.type) {
    case Tok::Name: {
      take();
      if (t.text == "true" || t.text == "True") return mk(t.pos, expr::Literal{Value(true)}, 0);
      if (t.text == "false" || t.text == "False") return mk(t.pos, expr::Literal{Value(false)}, 0);
      if (t.text == "none" || t.text == "None") return mk(t.pos, expr::Literal{Value(nullptr)}, 0);
      return mk(t.pos, expr::Name{t.text}, 0);
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) s += take().text;  // adjacent literals concatenate
      return mk(t.pos, expr::Literal{Value(std::move(s))}, 0);
    }
    case Tok::Int: take(); return parse_int(t);
    case Tok::Float: take(); return mk(t.pos, expr::Literal{Value(std::stod(t.text))}, 0);
    case Tok::Op:
      if (t.text == "(") return parse_paren();
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default: break;
  }
  error(t.pos, fmt::format("unexpected {}", describe(t)));
}

// A decimal integer token (digits only, from the lexer); fails rather than wrap past int64.
ExprPtr Parser::parse_int(const Token& t) {
  int64_t v = 0;
  for (const char c : t.text) {
    if (v > (INT64_MAX - (c - '0')) / 10) error(t.pos, fmt::format("integer literal {} is too large", t.text));
    v = v * 10 + (c - '0');
  }
  return mk(t.pos, expr::Literal{Value(v)}, 0);
}

ExprPtr Parser::parse_paren() {
  const Pos pos = take().pos;
  if (is_op(")")) {
    take();
    return mk(pos, expr::ListLit{}, 0);
  }
  ExprPtr e = parse_expression();
  if (is_op(",")) e = parse_tuple_rest(pos, std::move(e), /*with_cond=*/true, /*in_parens=*/true);
  expect_op(")");
  return e;
}

ExprPtr Parser::parse_list() {
  const Pos pos = take().pos;
  expr::ListLit items;
  int d = 0;
  parse_comma_list("]", [&] {
    items.items.push_back(parse_expression());
    d = std::max(d, items.items.back()->depth);
  });
  return mk(pos, std::move(items), d);
}

ExprPtr Parser::parse_dict() {
  const Pos pos = take().pos;
  expr::DictLit items;
  int d = 0;
  parse_comma_list("}", [&] {
    ExprPtr k = parse_expression();
    expect_op(":");
    ExprPtr v = parse_expression();
    d = std::max({d, k->depth, v->depth});
    items.items.emplace_back(std::move(k), std::move(v));
  });
  return mk(pos, std::move(items), d);
}

// ---- postfix, calls, filters and tests ----

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    const Pos pos = cur().pos;
    if (is_op(".")) {
      take();
      const int d = e->depth;
      if (cur().type == Tok::Int) {  // `x.0` indexes like `x[0]`
        ExprPtr idx = mk(cur().pos, expr::Literal{Value(static_cast<int64_t>(std::stoll(take().text)))}, 0);
        e = mk(pos, expr::GetItem{std::move(e), std::move(idx)}, d);
      } else {
        std::string attr = expect_name();
        e = mk(pos, expr::GetAttr{std::move(e), std::move(attr)}, d);
      }
    } else if (is_op("[")) {
      take();
      e = parse_subscript(pos, std::move(e));
    } else if (is_op("(")) {
      e = parse_call(pos, std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(Pos pos, ExprPtr obj) {
  ExprPtr start, stop, step;
  if (!is_op(":")) start = parse_expression();
  if (!is_op(":")) {
    expect_op("]");
    const int d = std::max(obj->depth, start->depth);
    return mk(pos, expr::GetItem{std::move(obj), std::move(start)}, d);
  }
  take();
  if (!is_op(":") && !is_op("]")) stop = parse_expression();
  if (is_op(":")) {
    take();
    if (!is_op("]")) step = parse_expression();
  }
  expect_op("]");
  int d = obj->depth;
  for (const auto* p : {&start, &stop, &step})
    if (*p) d = std::max(d, (*p)->depth);
  return mk(pos, expr::Slice{std::move(obj), std::move(start), std::move(stop), std::move(step)}, d);
}

ArgExprs Parser::parse_call_args() {
  expect_op("(");
  ArgExprs a;
  parse_comma_list(")", [&] {
    if (is_op("*") || is_op("**")) error(cur().pos, "*args and **kwargs in calls are not supported");
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      std::string key = take().text;
      take();
      a.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!a.kwargs.empty()) error(cur().pos, "positional argument after keyword argument");
      a.args.push_back(parse_expression());
    }
  });
  return a;
}

ExprPtr Parser::parse_call(Pos pos, ExprPtr fn) {
  ArgExprs args = parse_call_args();
  const int d = std::max(fn->depth, depth_of(args));
  return mk(pos, expr::Call{std::move(fn), std::move(args)}, d);
}

// `x | f(args) | g`, `x is [not] test [arg]`, and calls following them.
ExprPtr Parser::parse_filters(ExprPtr e) {
  while (true) {
    const Pos pos = cur().pos;
    if (is_op("|")) {
      take();
      std::string name = expect_name();
      ArgExprs args;
      if (is_op("(")) args = parse_call_args();
      const int d = std::max(e->depth, depth_of(args));
      e = mk(pos, expr::Filter{std::move(e), std::move(name), std::move(args)}, d);
    } else if (is_name("is")) {
      take();
      const bool negated = is_name("not");
      if (negated) take();
      std::string name = expect_name();
      ArgExprs args;
      if (is_op("(")) {
        args = parse_call_args();
      } else if (starts_test_arg()) {
        args.args.push_back(parse_postfix(parse_primary()));
      }
      const int d = std::max(e->depth, depth_of(args));
      e = mk(pos, expr::Test{std::move(e), std::move(name), std::move(args), negated}, d);
    } else if (is_op("(")) {
      e = parse_call(pos, std::move(e));
    } else {
      return e;
    }
  }
}

// Jinja2: a test takes one bare argument when a literal, name or bracket follows it.
bool Parser::starts_test_arg() const {
  const Token& t = cur();
  if (t.type == Tok::Name) return t.text != "else" && t.text != "or" && t.text != "and";
  if (t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float) return true;
  return t.type == Tok::Op && (t.text == "(" || t.text == "[" || t.text == "{");
}

}  // namespace gs::jinja::detail
