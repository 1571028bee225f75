// Jinja parser: tokens -> statement list, following jinja2's grammar and precedence
// (filters and `is` tests bind tighter than arithmetic: `1 + x|abs` is `1 + (x|abs)`).
//
//   Program p = parse(tokenize(src));
//
// Throws JinjaError: kSyntax for invalid templates, kUnsupported (naming the construct) for
// valid Jinja this engine does not run (include, extends, import, block...).
#pragma once

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace minfer::jinja {

Program parse(const std::vector<Token>& tokens);

}  // namespace minfer::jinja
