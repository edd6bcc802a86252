// Implements tokenizer/jinja/template.h.
#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/filters.h"
#include "tokenizer/jinja/is_tests.h"
#include "tokenizer/jinja/parser.h"

namespace gs::jinja {
namespace {

// Checks that every filter and test a template names exists, so a typo fails at load time.
class NameCheck {
 public:
  void body(const Body& b) {
    for (const auto& s : b) stmt(s);
  }

 private:
  [[noreturn]] static void unknown(const char* what, const std::string& name, Pos p) {
    fail("chat template syntax error at line {}, column {}: no {} named '{}'", p.line, p.col, what, name);
  }
  void args(const ArgExprs& a) {
    for (const auto& e : a.args) expr(*e);
    for (const auto& [k, e] : a.kwargs) expr(*e);
  }
  void opt(const ExprPtr& e) {
    if (e) expr(*e);
  }
  void expr(const Expr& e) {
    std::visit(
        [&](const auto& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, expr::GetAttr>) {
            expr(*n.obj);
          } else if constexpr (std::is_same_v<N, expr::GetItem>) {
            expr(*n.obj), expr(*n.index);
          } else if constexpr (std::is_same_v<N, expr::Slice>) {
            expr(*n.obj), opt(n.start), opt(n.stop), opt(n.step);
          } else if constexpr (std::is_same_v<N, expr::Call>) {
            expr(*n.fn), args(n.args);
          } else if constexpr (std::is_same_v<N, expr::Filter>) {
            if (!has_filter(n.name)) unknown("filter", n.name, e.pos);
            expr(*n.operand), args(n.args);
          } else if constexpr (std::is_same_v<N, expr::Test>) {
            if (!has_test(n.name)) unknown("test", n.name, e.pos);
            expr(*n.operand), args(n.args);
          } else if constexpr (std::is_same_v<N, expr::Unary>) {
            expr(*n.operand);
          } else if constexpr (std::is_same_v<N, expr::Binary>) {
            expr(*n.lhs), expr(*n.rhs);
          } else if constexpr (std::is_same_v<N, expr::Cond>) {
            expr(*n.cond), expr(*n.then), opt(n.otherwise);
          } else if constexpr (std::is_same_v<N, expr::ListLit>) {
            for (const auto& x : n.items) expr(*x);
          } else if constexpr (std::is_same_v<N, expr::DictLit>) {
            for (const auto& [k, v] : n.items) expr(*k), expr(*v);
          }
        },
        e.node);
  }
  void stmt(const Stmt& s) {
    std::visit(
        [&](const auto& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, stmt::Output>) {
            expr(*n.expr);
          } else if constexpr (std::is_same_v<N, stmt::If>) {
            for (const auto& br : n.branches) expr(*br.cond), body(br.body);
            body(n.otherwise);
          } else if constexpr (std::is_same_v<N, stmt::For>) {
            expr(*n.iter), opt(n.filter), body(n.body), body(n.otherwise);
          } else if constexpr (std::is_same_v<N, stmt::Set>) {
            expr(*n.value);
          } else if constexpr (std::is_same_v<N, stmt::SetBlock> || std::is_same_v<N, stmt::Block>) {
            body(n.body);
          } else if constexpr (std::is_same_v<N, stmt::Macro>) {
            for (const auto& p : n.params) opt(p.default_value);
            body(n.body);
          } else if constexpr (std::is_same_v<N, stmt::FilterBlock>) {
            if (!has_filter(n.name)) unknown("filter", n.name, s.pos);
            args(n.args), body(n.body);
          }
        },
        s.node);
  }
};

}  // namespace

Template::Template(std::string_view source, const LexOptions& opts) : body_(parse(lex(source, opts))) {
  NameCheck().body(body_);
}

std::string Template::render(const Dict& vars, const RenderLimits& limits) const {
  return Interpreter(vars, limits).render(body_);
}

}  // namespace gs::jinja
