// Text forms of values as Python writes them: str() (what `{{ x }}` prints), repr() (inside
// containers) and json.dumps(ensure_ascii=False) (the HF `tojson` filter).
#pragma once
#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

// Python float repr: shortest round-trip digits, "1.0", "1e+16", "inf", "nan".
std::string format_float(double d);
std::string to_str(const Value& v);
std::string to_repr(const Value& v);

struct JsonStyle {
  std::optional<int> indent;  // none: one line with ", " and ": "
  bool sort_keys = false;
};
// Throws gs::Error for values JSON cannot hold (undefined, functions).
std::string to_json(const Value& v, const JsonStyle& style);

}  // namespace gs::jinja
