// The Jinja parser: tokens to statement trees, with Jinja2's grammar and operator precedence
// (ternary < or < and < not < comparisons < + - < ~ < * / // % < ** < unary, then calls,
// attributes, subscripts, filters and `is` tests, which bind tightest).
#pragma once
#include <string_view>

#include "engine/chat/jinja/ast.h"

namespace kvdesk::jinja {

// Throws kvdesk::Error naming the template line for a syntax error, an unknown or unclosed
// statement, or nesting deeper than a template needs (a hostile file cannot exhaust the stack).
Body parse_template(std::string_view source);

}  // namespace kvdesk::jinja
