// Implements tokenizer/jinja/is_tests.h.
#include "tokenizer/jinja/is_tests.h"

#include <map>

#include "core/error.h"
#include "tokenizer/jinja/args.h"
#include "tokenizer/jinja/methods.h"
#include "tokenizer/jinja/operators.h"

namespace gs::jinja {
namespace {

using TestFn = bool (*)(const Value&, const CallArgs&);

bool no_args(const CallArgs& a, const char* name) {
  ArgBinder b(a, name, {});
  return true;
}

const Value& other(const CallArgs& a, const char* name) {
  GS_CHECK(a.args.size() == 1 && a.kwargs.empty(), "test '{}' takes exactly one argument", name);
  return a.args[0];
}

const std::map<std::string, TestFn, std::less<>>& table() {
  static const std::map<std::string, TestFn, std::less<>> t = {
      {"defined", [](const Value& v, const CallArgs& a) { return no_args(a, "defined") && !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs& a) { return no_args(a, "undefined") && v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs& a) { return no_args(a, "none") && v.is_none(); }},
      {"string", [](const Value& v, const CallArgs& a) { return no_args(a, "string") && v.is_string(); }},
      {"number", [](const Value& v, const CallArgs& a) { return no_args(a, "number") && v.is_number(); }},
      {"integer", [](const Value& v, const CallArgs& a) { return no_args(a, "integer") && v.is_int(); }},
      {"float", [](const Value& v, const CallArgs& a) { return no_args(a, "float") && v.is_float(); }},
      {"boolean", [](const Value& v, const CallArgs& a) { return no_args(a, "boolean") && v.is_bool(); }},
      {"true", [](const Value& v, const CallArgs& a) { return no_args(a, "true") && v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, const CallArgs& a) { return no_args(a, "false") && v.is_bool() && !v.as_bool(); }},
      {"mapping", [](const Value& v, const CallArgs& a) { return no_args(a, "mapping") && v.is_dict(); }},
      {"sequence",
       [](const Value& v, const CallArgs& a) {
         return no_args(a, "sequence") && (v.is_list() || v.is_string() || v.is_dict());
       }},
      {"iterable",
       [](const Value& v, const CallArgs& a) {
         return no_args(a, "iterable") && (v.is_list() || v.is_string() || v.is_dict() || v.is_undefined());
       }},
      {"callable", [](const Value& v, const CallArgs& a) { return no_args(a, "callable") && v.is_callable(); }},
      {"odd",
       [](const Value& v, const CallArgs& a) { return no_args(a, "odd") && int_arg(v, "odd", "value") % 2 != 0; }},
      {"even",
       [](const Value& v, const CallArgs& a) { return no_args(a, "even") && int_arg(v, "even", "value") % 2 == 0; }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const int64_t d = int_arg(other(a, "divisibleby"), "divisibleby", "num");
         GS_CHECK(d != 0, "divisibleby(0)");
         return int_arg(v, "divisibleby", "value") % d == 0;
       }},
      {"eq", [](const Value& v, const CallArgs& a) { return v.equals(other(a, "eq")); }},
      {"ne", [](const Value& v, const CallArgs& a) { return !v.equals(other(a, "ne")); }},
      {"lt", [](const Value& v, const CallArgs& a) { return compare(v, other(a, "lt"), "<") < 0; }},
      {"le", [](const Value& v, const CallArgs& a) { return compare(v, other(a, "le"), "<=") <= 0; }},
      {"gt", [](const Value& v, const CallArgs& a) { return compare(v, other(a, "gt"), ">") > 0; }},
      {"ge", [](const Value& v, const CallArgs& a) { return compare(v, other(a, "ge"), ">=") >= 0; }},
      {"in", [](const Value& v, const CallArgs& a) { return contains(other(a, "in"), v); }},
      {"sameas",
       [](const Value& v, const CallArgs& a) {
         const Value& o = other(a, "sameas");  // identity: exact for none/bools, value equality otherwise
         return v.kind() == o.kind() && v.equals(o);
       }},
      {"lower",
       [](const Value& v, const CallArgs& a) {
         return no_args(a, "lower") && v.is_string() && to_lower(v.as_string()) == v.as_string();
       }},
      {"upper",
       [](const Value& v, const CallArgs& a) {
         return no_args(a, "upper") && v.is_string() && to_upper(v.as_string()) == v.as_string();
       }},
  };
  return t;
}

std::string canonical(const std::string& name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "lessthan" || name == "<") return "lt";
  if (name == "<=") return "le";
  if (name == "greaterthan" || name == ">") return "gt";
  if (name == ">=") return "ge";
  return name;
}

}  // namespace

bool has_test(const std::string& name) { return table().count(canonical(name)) > 0; }

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  const auto it = table().find(canonical(name));
  GS_CHECK(it != table().end(), "no test named '{}'", name);
  return it->second(v, args);
}

}  // namespace gs::jinja
