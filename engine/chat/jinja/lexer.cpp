// The lexer works in two layers: the outer scan splits the source into text and tags and
// applies the whitespace rules to the text between them; the inner scan turns a tag's inside
// into names, literals and operators, as Jinja2's lexer does.
#include "engine/chat/jinja/lexer.h"

#include <cstring>

#include "engine/chat/jinja/text_ops.h"
#include "engine/error.h"

namespace kvdesk::jinja {
namespace {

constexpr std::string_view kSpace = " \t\n\r\f\v";

bool is_name_start(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error("chat template line " + std::to_string(line) + ": " + what);
}

// "\r\n" and "\r" become "\n"; one trailing newline goes (keep_trailing_newline off).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `digits` hex digits at s[i..]; -1 when they are not all there.
int64_t read_hex(std::string_view s, size_t i, size_t digits) {
  if (i + digits > s.size()) return -1;
  int64_t v = 0;
  for (size_t k = 0; k < digits; ++k) {
    const int h = hex_value(s[i + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// A string literal's body as Python's unicode-escape reads it (Jinja2 decodes literals so):
// \n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh and octal escapes; an unknown escape stays as written.
std::string unescape(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n': out += '\n'; continue;
      case 't': out += '\t'; continue;
      case 'r': out += '\r'; continue;
      case '\\': out += '\\'; continue;
      case '\'': out += '\''; continue;
      case '"': out += '"'; continue;
      case 'a': out += '\a'; continue;
      case 'b': out += '\b'; continue;
      case 'f': out += '\f'; continue;
      case 'v': out += '\v'; continue;
      case '\n': continue;
      default: break;
    }
    const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    const int64_t cp = digits ? read_hex(body, i + 1, digits) : -1;
    if (cp >= 0 && cp <= 0x10FFFF) {
      append_code_point(out, uint32_t(cp));
      i += digits;
    } else if (c >= '0' && c <= '7') {
      uint32_t v = 0;
      size_t k = 0;
      for (; k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7'; ++k) v = v * 8 + (body[i + k] - '0');
      append_code_point(out, v);
      i += k - 1;
    } else {
      out += '\\';
      out += c;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = next_tag(pos_);
      add_text(src_.substr(pos_, tag - pos_));
      if (tag == src_.size()) break;
      pos_ = tag;
      tag_at_pos();
    }
    tokens_.push_back({Token::Type::End, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void count_lines(std::string_view s) {
    for (char c : s) line_ += c == '\n';
  }

  // Text before a tag: what a preceding `-` (strip_next_) and lstrip_blocks take off its start
  // are applied when the tag after it is read (pending_).
  void add_text(std::string text) {
    count_lines(text);
    if (strip_next_) {
      const size_t keep = text.find_first_not_of(kSpace);
      text = keep == std::string::npos ? "" : text.substr(keep);
    }
    strip_next_ = false;
    tokens_.push_back({Token::Type::Text, std::move(text), line_});
  }

  // The text token just before the tag, whitespace-controlled for a tag of `kind` ('{', '%',
  // '#') with modifier ('-', '+' or 0).
  void control_preceding_text(char kind, char modifier) {
    if (tokens_.empty() || tokens_.back().type != Token::Type::Text) return;
    std::string& text = tokens_.back().value;
    if (modifier == '-') {
      const size_t end = text.find_last_not_of(kSpace);
      text.erase(end == std::string::npos ? 0 : end + 1);
    } else if (kind != '{' && modifier != '+') {
      lstrip_block(text);
    }
  }

  // lstrip_blocks: spaces and tabs between a line's start and a block or comment tag go.
  void lstrip_block(std::string& text) const {
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (newline == std::string::npos && !line_starting_) return;
    if (text.find_first_not_of(" \t", line_start) != std::string::npos) return;
    text.erase(line_start);
  }

  void tag_at_pos() {
    const char kind = src_[pos_ + 1];
    char modifier = 0;
    if (pos_ + 2 < src_.size() && (src_[pos_ + 2] == '-' || src_[pos_ + 2] == '+')) modifier = src_[pos_ + 2];
    control_preceding_text(kind, modifier);
    const int tag_line = line_;
    pos_ += modifier ? 3 : 2;
    if (kind == '#') {
      comment(tag_line);
    } else {
      tag_body(kind, tag_line);
    }
  }

  // After a tag closes at src_[at] (its last character), the text following it loses leading
  // whitespace for `-`, or one newline for trim_blocks after %} and #}.
  void after_close(size_t at, bool dash, bool block, bool plus) {
    pos_ = at + 1;
    if (dash) {
      strip_next_ = true;
      const size_t next = src_.find_first_not_of(kSpace, pos_);
      line_starting_ = next != pos_ && src_[(next == std::string::npos ? src_.size() : next) - 1] == '\n';
      return;
    }
    line_starting_ = false;
    if (block && !plus && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      line_starting_ = true;
    }
  }

  void comment(int tag_line) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(tag_line, "a comment {# is never closed with #}");
    count_lines(std::string_view(src_).substr(pos_, end - pos_));
    const bool dash = end > pos_ && src_[end - 1] == '-';
    const bool plus = end > pos_ && src_[end - 1] == '+';
    after_close(end + 1, dash, true, plus);
  }

  void tag_body(char kind, int tag_line) {
    tokens_.push_back({kind == '{' ? Token::Type::ExprOpen : Token::Type::StmtOpen, "", tag_line});
    const size_t first = tokens_.size();
    bracket_depth_ = 0;
    const char close = kind == '{' ? '}' : '%';
    while (true) {
      skip_space();
      if (pos_ >= src_.size()) fail(tag_line, kind == '{' ? "{{ is never closed with }}" : "{% is never closed with %}");
      const char c = src_[pos_];
      const bool modifier = (c == '-' || c == '+') && pos_ + 2 < src_.size() && src_[pos_ + 1] == close &&
                            src_[pos_ + 2] == '}';
      if (modifier || (c == close && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}' && bracket_depth_ <= 0)) {
        tokens_.push_back({kind == '{' ? Token::Type::ExprClose : Token::Type::StmtClose, "", line_});
        const size_t last = pos_ + (modifier ? 2 : 1);
        after_close(last, modifier && c == '-', kind == '%', modifier && c == '+');
        if (kind == '%' && tokens_.size() == first + 2 && tokens_[first].value == "raw") raw_body(tag_line);
        return;
      }
      inner_token();
    }
  }

  // {% raw %}...{% endraw %}: the body is text, whatever tags it holds.
  void raw_body(int tag_line) {
    tokens_.resize(tokens_.size() - 3);
    size_t search = pos_;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail(tag_line, "{% raw %} is never closed with {% endraw %}");
      size_t i = open + 2;
      const bool dash_open = i < src_.size() && src_[i] == '-';
      if (dash_open || (i < src_.size() && src_[i] == '+')) ++i;
      while (i < src_.size() && std::strchr(" \t\n", src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      i += 6;
      while (i < src_.size() && std::strchr(" \t\n", src_[i])) ++i;
      const bool dash_close = i < src_.size() && src_[i] == '-';
      if (dash_close || (i < src_.size() && src_[i] == '+')) ++i;
      if (src_.compare(i, 2, "%}") != 0) fail(line_, "{% endraw %} is not closed with %}");
      std::string body = src_.substr(pos_, open - pos_);
      if (strip_next_) body.erase(0, body.find_first_not_of(kSpace) == std::string::npos ? body.size() : body.find_first_not_of(kSpace));
      if (dash_open) body.erase(body.find_last_not_of(kSpace) == std::string::npos ? 0 : body.find_last_not_of(kSpace) + 1);
      strip_next_ = false;
      count_lines(std::string_view(src_).substr(pos_, i + 2 - pos_));
      tokens_.push_back({Token::Type::Text, std::move(body), line_});
      after_close(i + 1, dash_close, true, false);
      return;
    }
  }

  void skip_space() {
    while (pos_ < src_.size() && kSpace.find(src_[pos_]) != std::string_view::npos) {
      line_ += src_[pos_] == '\n';
      ++pos_;
    }
  }

  void inner_token() {
    const char c = src_[pos_];
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back({Token::Type::Name, src_.substr(start, pos_ - start), line_});
    } else if (is_digit(c)) {
      number();
    } else if (c == '\'' || c == '"') {
      string_literal(c);
    } else {
      operator_token();
    }
  }

  void number() {
    const size_t start = pos_;
    const auto digits = [&] {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])))) ++pos_;
    };
    digits();
    bool is_float = false;
    const bool after_dot = !tokens_.empty() && tokens_.back().type == Token::Type::Operator && tokens_.back().value == ".";
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t k = pos_ + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        pos_ = k;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? Token::Type::Float : Token::Type::Integer, text, line_});
  }

  void string_literal(char quote) {
    const int start_line = line_;
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) {
      if (src_[i] == '\\') ++i;
      ++i;
    }
    if (i >= src_.size()) fail(start_line, "a string literal is never closed");
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, i - pos_ - 1);
    count_lines(body);
    tokens_.push_back({Token::Type::String, unescape(body), start_line});
    pos_ = i + 1;
  }

  void operator_token() {
    static constexpr const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({Token::Type::Operator, op, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (std::strchr("+-*/%~<>=()[]{},.:|", c) == nullptr || c == 0) {
      fail(line_, std::string("unexpected character '") + c + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') ++bracket_depth_;
    if (c == ')' || c == ']' || c == '}') --bracket_depth_;
    tokens_.push_back({Token::Type::Operator, std::string(1, c), line_});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool strip_next_ = false;      // the next text loses its leading whitespace (a `-` closed the tag)
  bool line_starting_ = true;    // the next text starts a line (for lstrip_blocks)
  int bracket_depth_ = 0;        // brackets open in the current tag: a `}` inside one closes a dict
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_template(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace kvdesk::jinja
