// Internal to the parser: the recursive-descent Parser shared by parser.cpp (entry point and
// statements: tags and their bodies) and parser_expr.cpp (expressions: precedence, primaries,
// postfix, filters and tests). Not for use outside those two files.
#pragma once
#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace gs::jinja::detail {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  // The whole template; throws gs::Error on bad syntax.
  Body run();

 private:
  // Bounds parser recursion (nested parentheses, `not not ...`, `a if b else c if ...`).
  struct Nest {
    explicit Nest(Parser& p) : p(p) {
      if (++p.nesting_ > kMaxNesting)
        error(p.cur().pos, fmt::format("expression or block nested deeper than {} levels", kMaxNesting));
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    Parser& p;
  };

  // ---- token helpers ----
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool is_op(std::string_view s) const { return cur().type == Tok::Op && cur().text == s; }
  bool is_name(std::string_view s) const { return cur().type == Tok::Name && cur().text == s; }
  const Token& take() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }

  [[noreturn]] static void error(Pos p, const std::string& msg) {
    fail("chat template syntax error at line {}, column {}: {}", p.line, p.col, msg);
  }
  static std::string describe(const Token& t);
  void expect_op(std::string_view s);
  std::string expect_name();
  void expect_block_end();

  // Parses `item, item, ...` up to and including `close`; a trailing comma is allowed.
  // The opening bracket must already be consumed.
  template <typename Item>
  void parse_comma_list(std::string_view close, Item&& item) {
    while (!is_op(close)) {
      item();
      if (!is_op(close)) expect_op(",");
    }
    take();
  }

  // A node whose deepest child has height `child_depth`; fails past kMaxNesting.
  template <typename N>
  ExprPtr mk(Pos pos, N&& node, int child_depth) {
    if (child_depth + 1 > kMaxNesting) error(pos, fmt::format("expression nested deeper than {} levels", kMaxNesting));
    auto e = std::make_unique<Expr>();
    e->pos = pos;
    e->depth = child_depth + 1;
    e->node = std::forward<N>(node);
    return e;
  }

  // ---- statements (parser.cpp) ----
  // Parses until a `{% name %}` with name in `ends`; leaves the cursor on that name.
  Body parse_body(std::initializer_list<std::string_view> ends);
  // Parses a body through `{% end %}`, consuming that tag.
  Body parse_body_through(std::string_view end);
  Stmt parse_statement(Pos pos);
  stmt::If parse_if();
  std::vector<std::string> parse_targets();
  stmt::For parse_for();
  Stmt parse_set(Pos pos);
  stmt::Macro parse_macro();
  stmt::FilterBlock parse_filter_block();

  // ---- expressions (parser_expr.cpp) ----
  // An expression, or a tuple when commas follow (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr parse_tuple(bool with_cond = true);
  // The rest of a tuple after `first` when a comma follows; a trailing comma is allowed.
  ExprPtr parse_tuple_rest(Pos pos, ExprPtr first, bool with_cond, bool in_parens);
  ExprPtr parse_expression(bool with_cond = true);
  // `operand (op operand)*`, left-associative, for one precedence level.
  ExprPtr parse_left_assoc(ExprPtr (Parser::*operand)(), std::initializer_list<std::string_view> ops);
  // Consumes and returns the operator among `ops` at the cursor, or "" when none is.
  std::string take_binary_op(std::initializer_list<std::string_view> ops);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_filtered_unary() { return parse_unary(true); }
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_int(const Token& t);
  ExprPtr parse_paren();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(Pos pos, ExprPtr obj);
  ArgExprs parse_call_args();
  ExprPtr parse_call(Pos pos, ExprPtr fn);
  ExprPtr parse_filters(ExprPtr e);
  bool starts_test_arg() const;

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

// Height of the deepest argument expression (0 when there are none).
int depth_of(const ArgExprs& a);

}  // namespace gs::jinja::detail
