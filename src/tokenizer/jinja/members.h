// Member access as Jinja2 does it: `x.name` tries a method then an item, `x[key]` an item then
// a method; a missing member is undefined, but any member of an undefined value is an error.
#pragma once
#include <string>

#include "tokenizer/jinja/value.h"

namespace gs::jinja {

Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on a list or string (absent bounds are undefined values).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace gs::jinja
