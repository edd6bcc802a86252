// Global functions every template sees, as in HF's environment: raise_exception, strftime_now,
// and Jinja2's namespace, range (sandbox-limited), dict.
#pragma once
#include "core/error.h"
#include "tokenizer/jinja/value.h"

namespace gs::jinja {

// What `raise_exception(msg)` throws: the template's own message, unchanged.
class TemplateRaise : public Error {
 public:
  using Error::Error;
};

// Jinja2's sandbox refuses ranges longer than this.
inline constexpr int64_t kMaxRange = 100000;

Dict builtin_globals();

}  // namespace gs::jinja
