// Interpreter: renders a parsed template against variables, with Jinja2 scoping (a for loop or
// macro call opens a scope; `set` writes the innermost one) and bounded resources.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace gs::jinja {

// A render error located in the template ("chat template error at line L, column C: ...").
class TemplateError : public Error {
 public:
  using Error::Error;
};

struct RenderLimits {
  int max_call_depth = 32;                     // nested macro calls (recursive schema printers)
  int64_t max_loop_iterations = 1'000'000;     // all loop iterations of one render
  size_t max_output_bytes = size_t{64} << 20;  // rendered text of one render
};

class Interpreter {
 public:
  // `vars` are the render variables; builtin globals are added beneath them.
  explicit Interpreter(const Dict& vars, RenderLimits limits = {});
  // Throws TemplateRaise (raise_exception) or TemplateError.
  std::string render(const Body& body);

 private:
  enum class Flow { Normal, Break, Continue };
  struct ScopeGuard;

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  Flow exec_node(const stmt::If& s, std::string& out);
  Flow exec_node(const stmt::For& s, std::string& out);
  void exec_node(const stmt::Set& s);
  void run_loop_body(const stmt::For& s, const List& items, std::string& out);
  void bind_targets(const std::vector<std::string>& targets, const Value& v);
  void append(std::string& out, const std::string& text) const;

  Value eval(const Expr& e);
  Value eval_node(const Expr& e);
  CallArgs eval_args(const ArgExprs& a);
  Value call(const Value& fn, const CallArgs& args);
  Value make_macro(const stmt::Macro& m);
  Value call_macro(const stmt::Macro& m, const CallArgs& args);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);

  Dict globals_;
  std::vector<Dict> frames_;  // frames_[0]: the template's top level
  size_t base_ = 0;           // innermost macro's first frame (0 outside macros)
  RenderLimits limits_;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace gs::jinja
