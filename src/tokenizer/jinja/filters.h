// Jinja2's builtin filters (`x | trim`, `x | tojson(indent=2)`, `xs | selectattr(...)`, ...)
// with HF's tojson (no HTML escaping, non-ASCII kept).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

bool has_filter(const std::string& name);
// Throws gs::Error for an unknown filter or bad arguments.
Value apply_filter(const std::string& name, const Value& v, const CallArgs& args);

// The registry, filled by the scalar and sequence filter files.
using FilterFn = Value (*)(const Value&, const CallArgs&);
using FilterTable = std::map<std::string, FilterFn, std::less<>>;
void add_scalar_filters(FilterTable& t);
void add_sequence_filters(FilterTable& t);

}  // namespace gs::jinja
