#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "core/error.h"

namespace gs::jinja {
namespace {

int depth_of(const ArgExprs& a) {
  int d = 0;
  for (const auto& e : a.args) d = std::max(d, e->depth);
  for (const auto& [k, e] : a.kwargs) d = std::max(d, e->depth);
  return d;
}

class Parser {
  // Bounds parser recursion (nested parentheses, `not not ...`, `a if b else c if ...`).
  struct Nest {
    Nest(Parser& p) : p(p) {
      if (++p.nesting_ > kMaxNesting)
        error(p.cur().pos, fmt::format("expression or block nested deeper than {} levels", kMaxNesting));
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    Parser& p;
  };

 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Body run() {
    Body body = parse_body({});
    if (cur().type != Tok::Eof) error(cur().pos, fmt::format("unexpected '{}'", cur().text));
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool is_op(std::string_view s) const { return cur().type == Tok::Op && cur().text == s; }
  bool is_name(std::string_view s) const { return cur().type == Tok::Name && cur().text == s; }
  const Token& take() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }

  [[noreturn]] static void error(Pos p, const std::string& msg) {
    fail("chat template syntax error at line {}, column {}: {}", p.line, p.col, msg);
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::VarEnd: return "end of print statement '}}'";
      case Tok::BlockEnd: return "end of statement block '%}'";
      case Tok::Eof: return "end of template";
      case Tok::String: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(std::string_view s) {
    if (!is_op(s)) error(cur().pos, fmt::format("expected '{}', got {}", s, describe(cur())));
    take();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) error(cur().pos, fmt::format("expected a name, got {}", describe(cur())));
    return take().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) error(cur().pos, fmt::format("expected '%}}', got {}", describe(cur())));
    take();
  }

  template <typename N>
  ExprPtr mk(Pos pos, N&& node, int child_depth) {
    if (child_depth + 1 > kMaxNesting) error(pos, fmt::format("expression nested deeper than {} levels", kMaxNesting));
    auto e = std::make_unique<Expr>();
    e->pos = pos;
    e->depth = child_depth + 1;
    e->node = std::forward<N>(node);
    return e;
  }

  // ---- statements ----
  // Parses until a `{% name %}` with name in `ends`; leaves the cursor on that name.
  Body parse_body(std::initializer_list<std::string_view> ends) {
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

  Stmt parse_statement(Pos pos) {
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
      stmt::Block b{parse_body({"endgeneration"})};
      take();
      expect_block_end();
      return {pos, std::move(b)};
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

  stmt::If parse_if() {
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
      if (tag == "else") {
        expect_block_end();
        s.otherwise = parse_body({"endif"});
        take();
      }
      expect_block_end();
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
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

  stmt::For parse_for() {
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
    if (take().text == "else") {
      expect_block_end();
      s.otherwise = parse_body({"endfor"});
      take();
    }
    expect_block_end();
    return s;
  }

  Stmt parse_set(Pos pos) {
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
    stmt::SetBlock s{targets[0], parse_body({"endset"})};
    take();
    expect_block_end();
    return {pos, std::move(s)};
  }

  stmt::Macro parse_macro() {
    stmt::Macro m;
    m.name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      stmt::Param p{expect_name(), nullptr};
      if (is_op("=")) {
        take();
        p.default_value = parse_expression();
      }
      m.params.push_back(std::move(p));
      if (!is_op(")")) expect_op(",");
    }
    take();
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    m.body = parse_body({"endmacro"});
    loop_depth_ = saved;
    take();
    if (cur().type == Tok::Name) take();  // `{% endmacro name %}`
    expect_block_end();
    return m;
  }

  stmt::FilterBlock parse_filter_block() {
    stmt::FilterBlock f;
    f.name = expect_name();
    if (is_op("(")) f.args = parse_call_args();
    expect_block_end();
    f.body = parse_body({"endfilter"});
    take();
    expect_block_end();
    return f;
  }

  // ---- expressions ----
  // An expression, or a tuple when commas follow (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr parse_tuple(bool with_cond = true) {
    const Pos pos = cur().pos;
    ExprPtr first = parse_expression(with_cond);
    if (!is_op(",")) return first;
    expr::ListLit items;
    int d = first->depth;
    items.items.push_back(std::move(first));
    while (is_op(",")) {
      take();
      if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd || is_name("in")) break;
      items.items.push_back(parse_expression(with_cond));
      d = std::max(d, items.items.back()->depth);
    }
    return mk(pos, std::move(items), d);
  }

  ExprPtr parse_expression(bool with_cond = true) {
    const Nest nest(*this);
    ExprPtr e = parse_or();
    if (!with_cond) return e;
    while (is_name("if")) {
      const Pos pos = cur().pos;
      take();
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

  ExprPtr binary(Pos pos, std::string op, ExprPtr l, ExprPtr r) {
    const int d = std::max(l->depth, r->depth);
    return mk(pos, expr::Binary{std::move(op), std::move(l), std::move(r)}, d);
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Pos pos = take().pos;
      e = binary(pos, "or", std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Pos pos = take().pos;
      e = binary(pos, "and", std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      const Nest nest(*this);
      const Pos pos = take().pos;
      ExprPtr operand = parse_not();
      const int d = operand->depth;
      return mk(pos, expr::Unary{"not", std::move(operand)}, d);
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      const Pos pos = cur().pos;
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = take().text;
      } else if (is_name("in")) {
        take();
        op = "in";
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        take();
        take();
        op = "not in";
      } else {
        return e;
      }
      e = binary(pos, op, std::move(e), parse_math1());
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = take();
      e = binary(t.pos, t.text, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Pos pos = take().pos;
      e = binary(pos, "~", std::move(e), parse_math2());
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = take();
      e = binary(t.pos, t.text, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Pos pos = take().pos;
      e = binary(pos, "**", std::move(e), parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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
      case Tok::Int: {
        take();
        int64_t v = 0;
        for (const char c : t.text) {
          if (v > (INT64_MAX - (c - '0')) / 10) error(t.pos, fmt::format("integer literal {} is too large", t.text));
          v = v * 10 + (c - '0');
        }
        return mk(t.pos, expr::Literal{Value(v)}, 0);
      }
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

  ExprPtr parse_paren() {
    const Pos pos = take().pos;
    if (is_op(")")) {
      take();
      return mk(pos, expr::ListLit{}, 0);
    }
    ExprPtr e = parse_expression();
    if (is_op(",")) {
      expr::ListLit items;
      int d = e->depth;
      items.items.push_back(std::move(e));
      while (is_op(",")) {
        take();
        if (is_op(")")) break;
        items.items.push_back(parse_expression());
        d = std::max(d, items.items.back()->depth);
      }
      e = mk(pos, std::move(items), d);
    }
    expect_op(")");
    return e;
  }

  ExprPtr parse_list() {
    const Pos pos = take().pos;
    expr::ListLit items;
    int d = 0;
    while (!is_op("]")) {
      items.items.push_back(parse_expression());
      d = std::max(d, items.items.back()->depth);
      if (!is_op("]")) expect_op(",");
    }
    take();
    return mk(pos, std::move(items), d);
  }

  ExprPtr parse_dict() {
    const Pos pos = take().pos;
    expr::DictLit items;
    int d = 0;
    while (!is_op("}")) {
      ExprPtr k = parse_expression();
      expect_op(":");
      ExprPtr v = parse_expression();
      d = std::max({d, k->depth, v->depth});
      items.items.emplace_back(std::move(k), std::move(v));
      if (!is_op("}")) expect_op(",");
    }
    take();
    return mk(pos, std::move(items), d);
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const Pos pos = cur().pos;
      if (is_op(".")) {
        take();
        if (cur().type == Tok::Int) {
          ExprPtr idx = mk(cur().pos, expr::Literal{Value(static_cast<int64_t>(std::stoll(take().text)))}, 0);
          const int d = e->depth;
          e = mk(pos, expr::GetItem{std::move(e), std::move(idx)}, d);
        } else {
          std::string attr = expect_name();
          const int d = e->depth;
          e = mk(pos, expr::GetAttr{std::move(e), std::move(attr)}, d);
        }
      } else if (is_op("[")) {
        take();
        e = parse_subscript(pos, std::move(e));
      } else if (is_op("(")) {
        ArgExprs args = parse_call_args();
        const int d = std::max(e->depth, depth_of(args));
        e = mk(pos, expr::Call{std::move(e), std::move(args)}, d);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(Pos pos, ExprPtr obj) {
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

  ArgExprs parse_call_args() {
    expect_op("(");
    ArgExprs a;
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) error(cur().pos, "*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string key = take().text;
        take();
        a.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!a.kwargs.empty()) error(cur().pos, "positional argument after keyword argument");
        a.args.push_back(parse_expression());
      }
      if (!is_op(")")) expect_op(",");
    }
    take();
    return a;
  }

  // `x | f(args) | g`, `x is [not] test [arg]`, and calls following them.
  ExprPtr parse_filters(ExprPtr e) {
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
        bool negated = false;
        if (is_name("not")) {
          take();
          negated = true;
        }
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
        ArgExprs args = parse_call_args();
        const int d = std::max(e->depth, depth_of(args));
        e = mk(pos, expr::Call{std::move(e), std::move(args)}, d);
      } else {
        return e;
      }
    }
  }

  // Jinja2: a test takes one bare argument when a literal, name or bracket follows it.
  bool starts_test_arg() const {
    const Token& t = cur();
    if (t.type == Tok::Name) return t.text != "else" && t.text != "or" && t.text != "and";
    if (t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float) return true;
    return t.type == Tok::Op && (t.text == "(" || t.text == "[" || t.text == "{");
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace gs::jinja
