// Implements tokenizer/jinja/value.h.
#include "tokenizer/jinja/value.h"

#include "core/error.h"

namespace gs::jinja {

Value Value::from_json(const nlohmann::ordered_json& j, int max_depth) {
  GS_CHECK(max_depth > 0, "chat template input is nested too deeply (limit 256 levels)");
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value(nullptr);
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get<std::string>());
    case T::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(from_json(e, max_depth - 1));
      return Value(std::move(l));
    }
    case T::object: {
      Dict d;
      d.reserve(j.size());
      for (const auto& [k, v] : j.items()) d.emplace_back(k, from_json(v, max_depth - 1));
      return Value(std::move(d));
    }
    default: return Value(nullptr);  // binary / discarded: not produced by JSON text
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !as_list().empty();
    case Kind::Dict: return !as_dict().empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_float() || o.is_float()) return as_double() == o.as_double();
    return as_int() == o.as_int();
  }
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return as_string() == o.as_string();
    case Kind::List: {
      const auto &a = as_list(), &b = o.as_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!a[i].equals(b[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const auto &a = as_dict(), &b = o.as_dict();
      if (a.size() != b.size()) return false;
      for (const auto& [k, v] : a) {
        const Value* w = o.find(k);
        if (!w || !v.equals(*w)) return false;
      }
      return true;
    }
    case Kind::Namespace: return &as_namespace() == &o.as_namespace();
    case Kind::Callable: return &as_callable() == &o.as_callable();
    default: return false;
  }
}

const Value* Value::find(const std::string& key) const {
  const Dict* d = is_dict() ? &as_dict() : is_namespace() ? &as_namespace().attrs : nullptr;
  if (!d) return nullptr;
  for (const auto& [k, v] : *d)
    if (k == key) return &v;
  return nullptr;
}

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Callable: return "function";
  }
  return "object";
}

}  // namespace gs::jinja
