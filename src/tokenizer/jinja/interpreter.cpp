// Implements tokenizer/jinja/interpreter.h (Interpreter).
#include "tokenizer/jinja/interpreter.h"

#include <algorithm>

#include "tokenizer/jinja/filters.h"
#include "tokenizer/jinja/globals.h"
#include "tokenizer/jinja/is_tests.h"
#include "tokenizer/jinja/members.h"
#include "tokenizer/jinja/operators.h"
#include "tokenizer/jinja/value_text.h"

namespace gs::jinja {

// Opens a scope for a loop or macro call and closes it on every exit path.
struct Interpreter::ScopeGuard {
  ScopeGuard(Interpreter& in, bool isolate) : in(in), saved_base(in.base_) {
    in.frames_.emplace_back();
    if (isolate) in.base_ = in.frames_.size() - 1;
  }
  ~ScopeGuard() {
    in.frames_.pop_back();
    in.base_ = saved_base;
  }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
  Interpreter& in;
  size_t saved_base;
};

Interpreter::Interpreter(const Dict& vars, RenderLimits limits) : globals_(builtin_globals()), limits_(limits) {
  for (const auto& [k, v] : vars) {
    auto it = std::find_if(globals_.begin(), globals_.end(), [&](const auto& kv) { return kv.first == k; });
    if (it != globals_.end())
      it->second = v;
    else
      globals_.emplace_back(k, v);
  }
  frames_.emplace_back();
}

std::string Interpreter::render(const Body& body) {
  std::string out;
  exec_body(body, out);
  return out;
}

// ---- variables ----

Value Interpreter::lookup(const std::string& name) const {
  auto find_in = [&](const Dict& d) -> const Value* {
    for (const auto& [k, v] : d)
      if (k == name) return &v;
    return nullptr;
  };
  for (size_t i = frames_.size(); i-- > base_;)
    if (const Value* v = find_in(frames_[i])) return *v;
  if (base_ > 0)
    if (const Value* v = find_in(frames_[0])) return *v;
  if (const Value* v = find_in(globals_)) return *v;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

void Interpreter::assign(const std::string& name, Value v) {
  Dict& frame = frames_.back();
  for (auto& [k, x] : frame) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  frame.emplace_back(name, std::move(v));
}

void Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    assign(targets[0], v);
    return;
  }
  const List items = iterate(v);
  GS_CHECK(items.size() == targets.size(), "cannot unpack {} values into {} names", items.size(), targets.size());
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
}

// ---- statements ----

void Interpreter::append(std::string& out, const std::string& text) const {
  GS_CHECK(out.size() + text.size() <= limits_.max_output_bytes, "rendered text exceeds {} bytes",
           limits_.max_output_bytes);
  out += text;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out) {
  try {
    if (const auto* t = std::get_if<stmt::Text>(&s.node)) {
      append(out, t->text);
    } else if (const auto* o = std::get_if<stmt::Output>(&s.node)) {
      append(out, to_str(eval(*o->expr)));
    } else if (const auto* i = std::get_if<stmt::If>(&s.node)) {
      return exec_node(*i, out);
    } else if (const auto* f = std::get_if<stmt::For>(&s.node)) {
      return exec_node(*f, out);
    } else if (const auto* st = std::get_if<stmt::Set>(&s.node)) {
      exec_node(*st);
    } else if (const auto* sb = std::get_if<stmt::SetBlock>(&s.node)) {
      std::string text;
      exec_body(sb->body, text);
      assign(sb->target, Value(std::move(text)));
    } else if (const auto* m = std::get_if<stmt::Macro>(&s.node)) {
      assign(m->name, make_macro(*m));
    } else if (const auto* fb = std::get_if<stmt::FilterBlock>(&s.node)) {
      std::string text;
      const Flow flow = exec_body(fb->body, text);
      append(out, to_str(apply_filter(fb->name, Value(std::move(text)), eval_args(fb->args))));
      return flow;
    } else if (const auto* b = std::get_if<stmt::Block>(&s.node)) {
      return exec_body(b->body, out);
    } else if (std::holds_alternative<stmt::Break>(s.node)) {
      return Flow::Break;
    } else if (std::holds_alternative<stmt::Continue>(s.node)) {
      return Flow::Continue;
    }
  } catch (const TemplateRaise&) {
    throw;
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& e) {
    throw TemplateError(fmt::format("chat template error at line {}, column {}: {}", s.pos.line, s.pos.col, e.what()));
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_node(const stmt::If& s, std::string& out) {
  for (const auto& br : s.branches)
    if (eval(*br.cond).truthy()) return exec_body(br.body, out);
  return exec_body(s.otherwise, out);
}

Interpreter::Flow Interpreter::exec_node(const stmt::For& s, std::string& out) {
  const List all = iterate(eval(*s.iter));
  bool any = false;
  {
    ScopeGuard scope(*this, false);
    List items;
    for (const auto& item : all) {
      if (s.filter) {
        bind_targets(s.targets, item);
        if (!eval(*s.filter).truthy()) continue;
      }
      items.push_back(item);
    }
    any = !items.empty();
    run_loop_body(s, items, out);
  }
  if (!any) return exec_body(s.otherwise, out);
  return Flow::Normal;
}

void Interpreter::run_loop_body(const stmt::For& s, const List& items, std::string& out) {
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    GS_CHECK(++iterations_ <= limits_.max_loop_iterations, "template loops ran more than {} iterations",
             limits_.max_loop_iterations);
    const auto k = static_cast<size_t>(i);
    Dict loop = {
        {"index", Value(i + 1)},
        {"index0", Value(i)},
        {"revindex", Value(n - i)},
        {"revindex0", Value(n - i - 1)},
        {"first", Value(i == 0)},
        {"last", Value(i == n - 1)},
        {"length", Value(n)},
        {"depth", Value(1)},
        {"depth0", Value(0)},
        {"previtem", i > 0 ? items[k - 1] : Value::undefined("there is no previous item")},
        {"nextitem", i + 1 < n ? items[k + 1] : Value::undefined("there is no next item")},
        {"cycle", Value(Callable{"loop.cycle",
                                 [i](const CallArgs& a) {
                                   GS_CHECK(!a.args.empty(), "loop.cycle() needs at least one value");
                                   return a.args[static_cast<size_t>(i) % a.args.size()];
                                 }})},
    };
    assign("loop", Value(std::move(loop)));
    bind_targets(s.targets, items[k]);
    if (exec_body(s.body, out) == Flow::Break) break;
  }
}

void Interpreter::exec_node(const stmt::Set& s) {
  Value v = eval(*s.value);
  if (s.attr.empty()) {
    bind_targets(s.targets, v);
    return;
  }
  const Value ns = lookup(s.targets[0]);
  GS_CHECK(ns.is_namespace(), "cannot assign attribute '{}' on '{}' ({}): only namespace() objects allow it", s.attr,
           s.targets[0], type_name(ns));
  Dict& attrs = ns.as_namespace().attrs;
  for (auto& [k, x] : attrs) {
    if (k == s.attr) {
      x = std::move(v);
      return;
    }
  }
  attrs.emplace_back(s.attr, std::move(v));
}

// ---- macros ----

Value Interpreter::make_macro(const stmt::Macro& m) {
  return Value(Callable{m.name, [this, &m](const CallArgs& a) { return call_macro(m, a); }});
}

Value Interpreter::call_macro(const stmt::Macro& m, const CallArgs& a) {
  GS_CHECK(call_depth_ < limits_.max_call_depth, "macro calls nested deeper than {} (runaway recursion in '{}'?)",
           limits_.max_call_depth, m.name);
  GS_CHECK(a.args.size() <= m.params.size(), "macro '{}' takes {} arguments ({} given)", m.name, m.params.size(),
           a.args.size());
  ++call_depth_;
  struct DepthGuard {
    int& d;
    ~DepthGuard() { --d; }
  } depth_guard{call_depth_};
  ScopeGuard scope(*this, true);
  for (size_t i = 0; i < m.params.size(); ++i) {
    const auto& p = m.params[i];
    const auto kw = std::find_if(a.kwargs.begin(), a.kwargs.end(), [&](const auto& kv) { return kv.first == p.name; });
    if (i < a.args.size())
      assign(p.name, a.args[i]);
    else if (kw != a.kwargs.end())
      assign(p.name, kw->second);
    else if (p.default_value)
      assign(p.name, eval(*p.default_value));
    else
      assign(p.name, Value::undefined(fmt::format("'{}' is undefined", p.name)));
  }
  for (const auto& [k, v] : a.kwargs) {
    const bool known = std::any_of(m.params.begin(), m.params.end(), [&](const auto& p) { return p.name == k; });
    GS_CHECK(known, "macro '{}' got an unexpected keyword argument '{}'", m.name, k);
  }
  std::string out;
  exec_body(m.body, out);
  return Value(std::move(out));
}

// ---- expressions ----

CallArgs Interpreter::eval_args(const ArgExprs& a) {
  CallArgs out;
  for (const auto& e : a.args) out.args.push_back(eval(*e));
  for (const auto& [k, e] : a.kwargs) out.kwargs.emplace_back(k, eval(*e));
  return out;
}

Value Interpreter::call(const Value& fn, const CallArgs& args) {
  if (fn.is_undefined()) undefined_error(fn);
  GS_CHECK(fn.is_callable(), "'{}' object is not callable", type_name(fn));
  return fn.as_callable().fn(args);
}

Value Interpreter::eval(const Expr& e) { return eval_node(e); }

Value Interpreter::eval_node(const Expr& e) {
  if (const auto* n = std::get_if<expr::Literal>(&e.node)) return n->value;
  if (const auto* n = std::get_if<expr::Name>(&e.node)) return lookup(n->name);
  if (const auto* n = std::get_if<expr::GetAttr>(&e.node)) return get_attr(eval(*n->obj), n->attr);
  if (const auto* n = std::get_if<expr::GetItem>(&e.node)) {
    const Value obj = eval(*n->obj);
    return get_item(obj, eval(*n->index));
  }
  if (const auto* n = std::get_if<expr::Slice>(&e.node)) {
    const Value obj = eval(*n->obj);
    const Value start = n->start ? eval(*n->start) : Value();
    const Value stop = n->stop ? eval(*n->stop) : Value();
    const Value step = n->step ? eval(*n->step) : Value();
    return get_slice(obj, start, stop, step);
  }
  if (const auto* n = std::get_if<expr::Call>(&e.node)) {
    const Value fn = eval(*n->fn);
    return call(fn, eval_args(n->args));
  }
  if (const auto* n = std::get_if<expr::Filter>(&e.node)) {
    const Value v = eval(*n->operand);
    return apply_filter(n->name, v, eval_args(n->args));
  }
  if (const auto* n = std::get_if<expr::Test>(&e.node)) {
    const Value v = eval(*n->operand);
    return Value(apply_test(n->name, v, eval_args(n->args)) != n->negated);
  }
  if (const auto* n = std::get_if<expr::Unary>(&e.node)) return unary_op(n->op, eval(*n->operand));
  if (const auto* n = std::get_if<expr::Binary>(&e.node)) {
    Value lhs = eval(*n->lhs);
    if (n->op == "and") return lhs.truthy() ? eval(*n->rhs) : lhs;
    if (n->op == "or") return lhs.truthy() ? lhs : eval(*n->rhs);
    return binary_op(n->op, lhs, eval(*n->rhs));
  }
  if (const auto* n = std::get_if<expr::Cond>(&e.node)) {
    if (eval(*n->cond).truthy()) return eval(*n->then);
    return n->otherwise ? eval(*n->otherwise) : Value::undefined("the inline if expression had no else branch");
  }
  if (const auto* n = std::get_if<expr::ListLit>(&e.node)) {
    List out;
    for (const auto& x : n->items) out.push_back(eval(*x));
    return Value(std::move(out));
  }
  const auto& d = std::get<expr::DictLit>(e.node);
  Dict out;
  for (const auto& [k, v] : d.items) {
    const Value key = eval(*k);
    GS_CHECK(key.is_string(), "dict keys must be strings, got {}", type_name(key));
    Value val = eval(*v);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& kv) { return kv.first == key.as_string(); });
    if (it != out.end())
      it->second = std::move(val);
    else
      out.emplace_back(key.as_string(), std::move(val));
  }
  return Value(std::move(out));
}

}  // namespace gs::jinja
