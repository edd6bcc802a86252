// Implements tokenizer/jinja/args.h.
#include "tokenizer/jinja/args.h"

#include "core/error.h"

namespace gs::jinja {

ArgBinder::ArgBinder(const CallArgs& args, std::string_view fn, std::initializer_list<std::string_view> params)
    : fn_(fn), names_(params), bound_(params.size()) {
  // A last parameter named "*" collects extra positional arguments.
  const bool variadic = !names_.empty() && names_.back() == "*";
  const size_t named = names_.size() - (variadic ? 1 : 0);
  for (size_t i = 0; i < args.args.size(); ++i) {
    if (i < named)
      bound_[i] = args.args[i];
    else
      rest_.push_back(args.args[i]);
  }
  GS_CHECK(variadic || rest_.empty(), "{}() takes at most {} arguments ({} given)", fn_, named, args.args.size());
  for (const auto& [key, v] : args.kwargs) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != key) ++i;
    GS_CHECK(i < names_.size(), "{}() got an unexpected keyword argument '{}'", fn_, key);
    bound_[i] = v;
  }
}

const Value& ArgBinder::required(size_t i) const {
  GS_CHECK(has(i), "{}() missing required argument '{}'", fn_, names_[i]);
  return bound_[i];
}

int64_t int_arg(const Value& v, std::string_view fn, std::string_view param) {
  GS_CHECK(v.is_int() || v.is_bool(), "{}(): '{}' must be an integer, got {}", fn, param, type_name(v));
  return v.as_int();
}

const std::string& string_arg(const Value& v, std::string_view fn, std::string_view param) {
  GS_CHECK(v.is_string(), "{}(): '{}' must be a string, got {}", fn, param, type_name(v));
  return v.as_string();
}

}  // namespace gs::jinja
