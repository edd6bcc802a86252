// Syntax tree of a parsed template: expressions and statements, each with its source position.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/value.h"

namespace gs::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Arguments as written at a call, filter or test site.
struct ArgExprs {
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

namespace expr {
struct Literal {
  Value value;
};
struct Name {
  std::string name;
};
struct GetAttr {
  ExprPtr obj;
  std::string attr;
};  // obj.attr: methods first, then items
struct GetItem {
  ExprPtr obj;
  ExprPtr index;
};  // obj[index]: items first, then methods
struct Slice {
  ExprPtr obj;
  ExprPtr start, stop, step;
};  // absent parts are null
struct Call {
  ExprPtr fn;
  ArgExprs args;
};
struct Filter {
  ExprPtr operand;
  std::string name;
  ArgExprs args;
};
struct Test {
  ExprPtr operand;
  std::string name;
  ArgExprs args;
  bool negated = false;
};
struct Unary {
  std::string op;
  ExprPtr operand;
};  // "-", "+", "not"
struct Binary {
  std::string op;
  ExprPtr lhs, rhs;
};  // arithmetic, comparison, and/or, in, "not in", ~
struct Cond {
  ExprPtr cond, then, otherwise;
};  // `then if cond else otherwise` (else optional)
struct ListLit {
  std::vector<ExprPtr> items;
};  // lists and tuples
struct DictLit {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
}  // namespace expr

struct Expr {
  Pos pos;
  int depth = 1;  // height of this subtree; the parser bounds it so evaluation cannot overflow
  std::variant<expr::Literal, expr::Name, expr::GetAttr, expr::GetItem, expr::Slice, expr::Call, expr::Filter,
               expr::Test, expr::Unary, expr::Binary, expr::Cond, expr::ListLit, expr::DictLit>
      node;
};

struct Stmt;
using Body = std::vector<Stmt>;

namespace stmt {
struct Text {
  std::string text;
};
struct Output {
  ExprPtr expr;
};
struct Branch {
  ExprPtr cond;
  Body body;
};
struct If {
  std::vector<Branch> branches;
  Body otherwise;
};
struct For {
  std::vector<std::string> targets;  // one name, or several to unpack
  ExprPtr iter;
  ExprPtr filter;  // `for x in xs if cond`: may be null
  Body body;
  Body otherwise;  // runs when nothing was iterated
};
struct Set {
  std::vector<std::string> targets;  // `set a = ...` / `set a, b = ...`
  std::string attr;                  // `set ns.attr = ...`: targets = {ns}
  ExprPtr value;
};
struct SetBlock {
  std::string target;
  Body body;
};
struct Param {
  std::string name;
  ExprPtr default_value;
};  // default may be null
struct Macro {
  std::string name;
  std::vector<Param> params;
  Body body;
};
struct FilterBlock {
  std::string name;
  ArgExprs args;
  Body body;
};
struct Block {
  Body body;
};  // {% generation %} (HF): renders its body unchanged
struct Break {};
struct Continue {};
}  // namespace stmt

struct Stmt {
  Pos pos;
  std::variant<stmt::Text, stmt::Output, stmt::If, stmt::For, stmt::Set, stmt::SetBlock, stmt::Macro, stmt::FilterBlock,
               stmt::Block, stmt::Break, stmt::Continue>
      node;
};

}  // namespace gs::jinja
