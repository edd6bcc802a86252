// Python operator semantics on template values (arithmetic, comparison, membership, iteration).
#pragma once
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

// Binary operators other than and/or (which short-circuit in the evaluator):
// + - * / // % ** ~ == != < <= > >= in, "not in". Throws gs::Error on a Python TypeError.
Value binary_op(std::string_view op, const Value& a, const Value& b);
// Unary "-", "+", "not".
Value unary_op(std::string_view op, const Value& v);
// `item in container` (substring for strings, element for lists, key for dicts).
bool contains(const Value& container, const Value& item);
// Python ordering for numbers, strings and lists; negative / zero / positive.
int compare(const Value& a, const Value& b, std::string_view op);
// What `for x in v` visits: list items, dict keys, string characters; nothing for undefined.
List iterate(const Value& v);
// Python len(): code points of a string, size of a list or dict; 0 for undefined.
int64_t length(const Value& v);
// Throws the error that misusing an undefined value raises (its hint: "'x' is undefined").
[[noreturn]] void undefined_error(const Value& v);

}  // namespace gs::jinja
