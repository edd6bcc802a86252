// Binds call arguments (positional and keyword) to a builtin's named parameters, Python style.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

class ArgBinder {
 public:
  // Throws gs::Error for too many positional arguments or an unknown keyword. A last parameter
  // named "*" accepts any number of extra positional arguments (see rest()).
  ArgBinder(const CallArgs& args, std::string_view fn, std::initializer_list<std::string_view> params);

  // The i-th parameter (undefined when not passed).
  const Value& get(size_t i) const { return bound_[i]; }
  bool has(size_t i) const { return !bound_[i].is_undefined(); }
  Value get_or(size_t i, Value fallback) const { return has(i) ? bound_[i] : std::move(fallback); }
  // The i-th parameter, which must be passed.
  const Value& required(size_t i) const;
  // Positional arguments past the named parameters (for *args builtins).
  const std::vector<Value>& rest() const { return rest_; }

 private:
  std::string fn_;
  std::vector<std::string_view> names_;
  std::vector<Value> bound_;
  std::vector<Value> rest_;
};

// Typed parameter readers with error messages naming the function and parameter.
int64_t int_arg(const Value& v, std::string_view fn, std::string_view param);
const std::string& string_arg(const Value& v, std::string_view fn, std::string_view param);

}  // namespace gs::jinja
