// The Jinja lexer: template source to tokens, with the whitespace rules Hugging Face renders
// chat templates with (trim_blocks and lstrip_blocks on, one trailing newline of the source
// dropped, "\r\n" and "\r" read as "\n"), `-` and `+` whitespace control, comments dropped and
// {% raw %} bodies kept as text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::jinja {

struct Token {
  enum class Type : uint8_t {
    Text,          // template text outside tags (value: the text after whitespace control)
    ExprOpen,      // {{
    ExprClose,     // }}
    StmtOpen,      // {%
    StmtClose,     // %}
    Name,          // identifiers and keywords
    String,        // a string literal, unescaped
    Integer,
    Float,
    Operator,      // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
    End,
  };
  Type type;
  std::string value;
  int line;
};

// Throws kvdesk::Error naming the line for an unterminated tag, string or comment, or a
// character that cannot start a token.
std::vector<Token> lex_template(std::string_view source);

}  // namespace kvdesk::jinja
