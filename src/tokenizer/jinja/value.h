// A template value: Python's data model as Jinja2 templates see it (undefined, none, bool, int,
// float, str, list, dict, namespace, callable). Lists and dicts are immutable and shared (the
// HF sandbox is immutable); a namespace is the one mutable object (`{% set ns.x = ... %}`).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gs::jinja {

class Value;
using List = std::vector<Value>;
// Insertion-ordered, string-keyed (Python dicts keep order; tojson and items() depend on it).
using Dict = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional then keyword, as written.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};
using Function = std::function<Value(const CallArgs&)>;

struct Undefined {
  std::string hint;  // why it is undefined ("'x' is undefined"), for the error when it is misused
};
struct Namespace {
  Dict attrs;
};
struct Callable {
  std::string name;
  Function fn;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() : v_(Undefined{}) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<const List>(std::move(l))) {}
  Value(Dict d) : v_(std::make_shared<const Dict>(std::move(d))) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}
  Value(Callable c) : v_(std::make_shared<const Callable>(std::move(c))) {}

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  // Converts JSON (keeping object key order); throws gs::Error past `max_depth` nesting.
  static Value from_json(const nlohmann::ordered_json& j, int max_depth = 256);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? int64_t{as_bool()} : std::get<int64_t>(v_); }
  double as_double() const { return is_float() ? std::get<double>(v_) : static_cast<double>(as_int()); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python truthiness (undefined is false).
  bool truthy() const;
  // Python `==` (1 == 1.0, deep for containers; undefined equals only undefined).
  bool equals(const Value& o) const;
  // Dict / namespace member lookup; nullptr when absent.
  const Value* find(const std::string& key) const;

 private:
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Namespace>, std::shared_ptr<const Callable>>
      v_;
};

// Python's type name of a value, for error messages ("str", "dict", "NoneType", ...).
const char* type_name(const Value& v);

}  // namespace gs::jinja
