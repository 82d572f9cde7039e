// jinja_default_system: the template's {% %} statements in order, and an evaluator for the few
// statement and expression forms default system messages are written with. Anything else in
// the branch that computes the message makes it unreadable rather than guessed.
#include "engine/chat/jinja_default_system.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iomanip>
#include <locale>
#include <map>
#include <optional>
#include <sstream>

namespace kvdesk {
namespace {

constexpr size_t kNone = std::string_view::npos;

// Request inputs kvdesk never gives a template: undefined there, so false in its conditions.
constexpr std::array<std::string_view, 5> kAbsentInputs = {"tools", "available_tools", "documents", "thinking",
                                                           "controls"};

// Keywords of the statements that open a block closed by an end... statement.
constexpr std::array<std::string_view, 9> kBlockKeywords = {"if",    "for",  "macro", "call",      "filter",
                                                            "block", "with", "raw",   "autoescape"};

// Variables the template has set, by name, to values the evaluator could compute.
using Variables = std::map<std::string, DatedText, std::less<>>;

std::string_view trimmed(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == kNone) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

// The index just past the string literal whose opening quote is s[begin]; kNone when it is
// not closed.
size_t string_literal_end(std::string_view s, size_t begin) {
  const char quote = s[begin];
  for (size_t i = begin + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == quote) {
      return i + 1;
    }
  }
  return kNone;
}

bool is_string_literal(std::string_view s) {
  return s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && string_literal_end(s, 0) == s.size();
}

// The value of a Jinja string literal, quotes included in `literal`: Jinja decodes Python's
// escapes, of which templates use \n, \t, \r, \\, \', \" and a backslash before a line break
// (which joins the two lines). nullopt for any other escape.
std::optional<std::string> string_literal_value(std::string_view literal) {
  std::string out;
  const std::string_view body = literal.substr(1, literal.size() - 2);
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      out += body[i];
      continue;
    }
    if (++i == body.size()) return std::nullopt;
    switch (body[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': case '\'': case '"': out += body[i]; break;
      case '\n': break;
      default: return std::nullopt;
    }
  }
  return out;
}

// s split at every sep that is not inside a string literal, the parts trimmed.
std::vector<std::string_view> split_outside_strings(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> parts;
  size_t part_begin = 0;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\'' || s[i] == '"') {
      i = string_literal_end(s, i);
      if (i == kNone) break;
    } else if (s.substr(i, sep.size()) == sep) {
      parts.push_back(trimmed(s.substr(part_begin, i - part_begin)));
      i += sep.size();
      part_begin = i;
    } else {
      ++i;
    }
  }
  parts.push_back(trimmed(s.substr(std::min(part_begin, s.size()))));
  return parts;
}

// One {% %} statement: its keyword ("set", "if", ...) and what follows it, trimmed, without
// the whitespace-control marks ({%- -%}).
struct Statement {
  std::string_view keyword;
  std::string_view rest;
};

Statement parse_statement(std::string_view body) {
  if (!body.empty() && (body.front() == '-' || body.front() == '+')) body.remove_prefix(1);
  if (!body.empty() && (body.back() == '-' || body.back() == '+')) body.remove_suffix(1);
  body = trimmed(body);
  const size_t space = body.find_first_of(" \t\n\r");
  if (space == kNone) return {body, {}};
  return {body.substr(0, space), trimmed(body.substr(space))};
}

// Where the tag that `close` ends ("%}" or "}}") closes, string literals skipped; kNone when
// it does not.
size_t tag_close(std::string_view text, size_t from, std::string_view close) {
  for (size_t i = from; i < text.size();) {
    if (text[i] == '\'' || text[i] == '"') {
      i = string_literal_end(text, i);
      if (i == kNone) return kNone;
    } else if (text.substr(i, close.size()) == close) {
      return i;
    } else {
      ++i;
    }
  }
  return kNone;
}

// The template's statements in order; {{ }} expressions and {# #} comments are skipped.
std::vector<Statement> statements_of(std::string_view text) {
  std::vector<Statement> out;
  size_t at = text.find('{');
  while (at != kNone && at + 1 < text.size()) {
    const char kind = text[at + 1];
    size_t next = at + 1;
    if (kind == '#' || kind == '%' || kind == '{') {
      const size_t close = kind == '#' ? text.find("#}", at + 2) : tag_close(text, at + 2, kind == '%' ? "%}" : "}}");
      if (close == kNone) break;
      if (kind == '%') out.push_back(parse_statement(text.substr(at + 2, close - at - 2)));
      next = close + 2;
    }
    at = text.find('{', next);
  }
  return out;
}

// `target = expr` of a set statement; nullopt for a block set ({% set x %}...{% endset %}).
struct Assignment {
  std::string_view target;
  std::string_view expr;
};

std::optional<Assignment> assignment_of(const Statement& s) {
  if (s.keyword != "set") return std::nullopt;
  const size_t eq = s.rest.find('=');
  if (eq == kNone || s.rest.substr(eq, 2) == "==") return std::nullopt;
  return Assignment{trimmed(s.rest.substr(0, eq)), trimmed(s.rest.substr(eq + 1))};
}

bool opens_block(const Statement& s) {
  const bool block_keyword = std::find(kBlockKeywords.begin(), kBlockKeywords.end(), s.keyword) != kBlockKeywords.end();
  return block_keyword || (s.keyword == "set" && !assignment_of(s));
}

bool closes_block(const Statement& s) { return s.keyword.starts_with("end"); }

// The statement as the template writes it, shortened, for messages.
std::string quoted(const Statement& s) {
  constexpr size_t kMaxShown = 80;
  std::string text = std::string(s.keyword) + (s.rest.empty() ? "" : " ") + std::string(s.rest);
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return "{% " + text + " %}";
}

// Its text without whitespace, with double quotes written as single ones, for comparisons.
std::string compact(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) out += c == '"' ? '\'' : c;
  }
  return out;
}

bool tests_first_message_is_system(std::string_view condition) {
  const std::string c = compact(condition);
  return c == "messages[0]['role']=='system'" || c == "messages[0].role=='system'";
}

bool is_first_message_content(std::string_view expr) {
  const std::string c = compact(expr);
  return c == "messages[0]['content']" || c == "messages[0].content";
}

// A string literal, strftime_now('<format>') or a variable set to such values.
std::optional<DatedText> operand_value(std::string_view operand, const Variables& variables) {
  constexpr std::string_view kStrftime = "strftime_now(";
  if (is_string_literal(operand)) {
    const std::optional<std::string> text = string_literal_value(operand);
    return text ? std::optional(DatedText::literal(*text)) : std::nullopt;
  }
  if (operand.starts_with(kStrftime) && operand.ends_with(')')) {
    const std::string_view argument = trimmed(operand.substr(kStrftime.size(), operand.size() - kStrftime.size() - 1));
    if (!is_string_literal(argument)) return std::nullopt;
    const std::optional<std::string> format = string_literal_value(argument);
    return format ? std::optional(DatedText{{{*format, true}}}) : std::nullopt;
  }
  const auto variable = variables.find(operand);
  return variable != variables.end() ? std::optional(variable->second) : std::nullopt;
}

// Operands joined by +; nullopt when any part is something else.
std::optional<DatedText> expression_value(std::string_view expr, const Variables& variables) {
  DatedText out;
  for (const std::string_view operand : split_outside_strings(expr, "+")) {
    const std::optional<DatedText> value = operand_value(operand, variables);
    if (!value) return std::nullopt;
    out.append(*value);
  }
  return out;
}

bool is_absent_input(std::string_view name) {
  return std::find(kAbsentInputs.begin(), kAbsentInputs.end(), name) != kAbsentInputs.end();
}

// A condition's truth for a request without tools, documents, thinking or controls: `and` /
// `or` / `not` of those inputs, of `'text' in <input>`, and of variables set to texts (true
// when not empty). nullopt when it depends on anything else.
std::optional<bool> condition_value(std::string_view condition, const Variables& variables) {
  condition = trimmed(condition);
  for (const std::string_view op : {" or ", " and "}) {
    const std::vector<std::string_view> operands = split_outside_strings(condition, op);
    if (operands.size() == 1) continue;
    const bool decisive = op == " or ";   // the value that decides the whole chain
    bool all_known = true;
    for (const std::string_view operand : operands) {
      const std::optional<bool> value = condition_value(operand, variables);
      if (value == decisive) return decisive;
      all_known = all_known && value.has_value();
    }
    return all_known ? std::optional(!decisive) : std::nullopt;
  }
  if (condition.starts_with("not ")) {
    const std::optional<bool> value = condition_value(condition.substr(4), variables);
    return value ? std::optional(!*value) : std::nullopt;
  }
  if (const std::vector<std::string_view> in = split_outside_strings(condition, " in ");
      in.size() == 2 && is_string_literal(in[0]) && is_absent_input(in[1])) {
    return false;
  }
  if (const auto variable = variables.find(condition); variable != variables.end()) return !variable->second.empty();
  if (is_absent_input(condition)) return false;
  return std::nullopt;
}

// Sets target to the expression's value, or forgets it when the evaluator cannot compute the
// value (loop_messages = messages); whether it could.
bool record_assignment(Variables& variables, const Assignment& a) {
  const std::optional<DatedText> value = expression_value(a.expr, variables);
  if (value) {
    variables.insert_or_assign(std::string(a.target), *value);
  } else if (const auto known = variables.find(a.target); known != variables.end()) {
    variables.erase(known);
  }
  return value.has_value();
}

// The if block opened at statements[open] as the indexes of its branches' opening statements
// (if, elif, else) and of its endif; nullopt when it is not closed before end.
std::optional<std::vector<size_t>> if_branches(const std::vector<Statement>& statements, size_t open, size_t end) {
  std::vector<size_t> borders = {open};
  size_t depth = 0;
  for (size_t i = open + 1; i < end; ++i) {
    const Statement& s = statements[i];
    if (depth == 0 && (s.keyword == "elif" || s.keyword == "else")) {
      borders.push_back(i);
    } else if (depth == 0 && s.keyword == "endif") {
      borders.push_back(i);
      return borders;
    } else if (closes_block(s)) {
      if (depth == 0) return std::nullopt;
      --depth;
    } else if (opens_block(s)) {
      ++depth;
    }
  }
  return std::nullopt;
}

// Runs the statements of the branch that computes the system message: assignments, and if
// blocks whose conditions condition_value decides.
class BranchRunner {
 public:
  BranchRunner(const std::vector<Statement>& statements, Variables& variables, std::string_view system_variable)
      : statements_(statements), variables_(variables), system_variable_(system_variable) {}

  // Runs statements [begin, end); false, with unreadable() saying why, at the first statement
  // it cannot follow.
  bool run(size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const Statement& s = statements_[i];
      if (const std::optional<Assignment> a = assignment_of(s)) {
        if (!record_assignment(variables_, *a) && a->target == system_variable_) return fail(s);
      } else if (s.keyword == "if") {
        const std::optional<size_t> endif = run_if(i, end);
        if (!endif) return false;
        i = *endif;
      } else {
        return fail(s);
      }
    }
    return true;
  }

  const std::string& unreadable() const { return unreadable_; }

 private:
  // Runs the branch the conditions choose; the index of the block's endif, or nullopt.
  std::optional<size_t> run_if(size_t open, size_t end) {
    const std::optional<std::vector<size_t>> borders = if_branches(statements_, open, end);
    if (!borders) {
      fail(statements_[open]);
      return std::nullopt;
    }
    for (size_t b = 0; b + 1 < borders->size(); ++b) {
      const Statement& head = statements_[(*borders)[b]];
      if (head.keyword != "else") {
        const std::optional<bool> taken = condition_value(head.rest, variables_);
        if (!taken) {
          fail(head);
          return std::nullopt;
        }
        if (!*taken) continue;
      }
      if (!run((*borders)[b] + 1, (*borders)[b + 1])) return std::nullopt;
      break;
    }
    return borders->back();
  }

  bool fail(const Statement& s) {
    unreadable_ = quoted(s);
    return false;
  }

  const std::vector<Statement>& statements_;
  Variables& variables_;
  std::string_view system_variable_;
  std::string unreadable_;
};

// The name the branch for a leading system message gives its content (system_message);
// nullopt when it gives it none.
std::optional<std::string_view> system_variable(const std::vector<Statement>& statements, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const std::optional<Assignment> a = assignment_of(statements[i]);
    if (a && is_first_message_content(a->expr)) return a->target;
  }
  return std::nullopt;
}

// The system message the else branch of `if messages[0]['role'] == 'system'` (opened at
// statements[open]) sets, with the variables set before it.
JinjaDefaultSystem default_from_branch(const std::vector<Statement>& statements, size_t open, Variables variables) {
  const std::optional<std::vector<size_t>> borders = if_branches(statements, open, statements.size());
  if (!borders || borders->size() != 3 || statements[(*borders)[1]].keyword != "else") return {};
  const size_t else_at = (*borders)[1];
  const std::optional<std::string_view> variable = system_variable(statements, open + 1, else_at);
  if (!variable) return {};
  if (const auto earlier = variables.find(*variable); earlier != variables.end()) variables.erase(earlier);
  BranchRunner runner(statements, variables, *variable);
  if (!runner.run(else_at + 1, borders->back())) return {{}, runner.unreadable()};
  const auto value = variables.find(*variable);
  return value != variables.end() ? JinjaDefaultSystem{value->second, ""} : JinjaDefaultSystem{};
}

}  // namespace

DatedText DatedText::literal(std::string text) {
  DatedText out;
  if (!text.empty()) out.parts.push_back({std::move(text), false});
  return out;
}

bool DatedText::has_date() const {
  return std::any_of(parts.begin(), parts.end(), [](const Part& p) { return p.is_date; });
}

void DatedText::append(const DatedText& other) {
  for (const Part& part : other.parts) {
    if (!part.is_date && !parts.empty() && !parts.back().is_date) {
      parts.back().text += part.text;
    } else {
      parts.push_back(part);
    }
  }
}

std::string DatedText::format(const std::tm& date) const {
  std::string out;
  for (const Part& part : parts) {
    if (!part.is_date) {
      out += part.text;
      continue;
    }
    std::ostringstream formatted;
    formatted.imbue(std::locale::classic());
    formatted << std::put_time(&date, part.text.c_str());
    out += formatted.str();
  }
  return out;
}

JinjaDefaultSystem jinja_default_system(std::string_view template_text) {
  const std::vector<Statement> statements = statements_of(template_text);
  Variables variables;   // set outside any block before the branch (Mistral's today)
  size_t depth = 0;
  for (size_t i = 0; i < statements.size(); ++i) {
    const Statement& s = statements[i];
    if (depth == 0 && s.keyword == "if" && tests_first_message_is_system(s.rest)) {
      return default_from_branch(statements, i, variables);
    }
    if (const std::optional<Assignment> a = assignment_of(s); a && depth == 0) record_assignment(variables, *a);
    if (closes_block(s)) {
      depth -= depth > 0 ? 1 : 0;
    } else if (opens_block(s)) {
      ++depth;
    }
  }
  return {};
}

std::optional<DatedText> jinja_assigned_value(std::string_view template_text, std::string_view name) {
  std::optional<DatedText> first;
  for (const Statement& s : statements_of(template_text)) {
    const std::optional<Assignment> a = assignment_of(s);
    if (!a || a->target != name) continue;
    std::optional<DatedText> value = expression_value(a->expr, {});
    if (!value) continue;
    if (value->has_date()) return value;
    if (!first) first = std::move(value);
  }
  return first;
}

std::tm local_now() { return local_time(std::time(nullptr)); }

std::tm local_time(std::time_t time) {
  std::tm out{};
  localtime_r(&time, &out);
  return out;
}

}  // namespace kvdesk
