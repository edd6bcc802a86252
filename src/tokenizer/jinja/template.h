// A compiled template: parsed once (syntax and unknown filter/test names are errors at load,
// as in Jinja2), then rendered any number of times. Immutable and thread-safe to render.
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/interpreter.h"

namespace gs::jinja {

class Template {
 public:
  // Throws gs::Error naming line and column for syntax errors.
  explicit Template(std::string_view source, const LexOptions& opts = {});
  // Throws TemplateRaise (the template's raise_exception message) or TemplateError.
  std::string render(const Dict& vars, const RenderLimits& limits = {}) const;

 private:
  Body body_;
};

}  // namespace gs::jinja
