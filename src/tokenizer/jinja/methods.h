// Python methods that templates call on values: str (strip, split, startswith, format, ...),
// dict (items, keys, values, get) and list (index, count). Mutating methods are absent, as in
// the immutable sandbox HF renders with.
#pragma once
#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

// `obj.name` as a bound method, or nullopt when the type has no such method.
std::optional<Value> find_method(const Value& obj, const std::string& name);

// Unicode case mapping of a UTF-8 string (Python's str.upper/lower/title/capitalize).
std::string to_upper(const std::string& s);
std::string to_lower(const std::string& s);
std::string to_title(const std::string& s);
std::string capitalize(const std::string& s);

// Python's str.replace(old, new, count) (count < 0: all).
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count);

}  // namespace gs::jinja
