// Parser: tokens -> statement tree, with Jinja2's grammar and operator precedence.
#pragma once
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace gs::jinja {

// Nesting limit for expressions and blocks, so hostile templates cannot overflow the stack.
inline constexpr int kMaxNesting = 200;

// Throws gs::Error "chat template syntax error at line L, column C: ..." on bad syntax.
Body parse(const std::vector<Token>& tokens);

}  // namespace gs::jinja
