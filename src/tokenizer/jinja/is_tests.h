// Jinja2's tests (`x is defined`, `x is string`, `x is equalto y`, ...).
#pragma once
#include <string>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

bool has_test(const std::string& name);
// Throws gs::Error for an unknown test name or bad arguments.
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);

}  // namespace gs::jinja
