// Recursive descent over the lexer's tokens, one function per precedence level as Jinja2's
// parser has them, so the same source groups the same way.
#include "engine/chat/jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "engine/chat/jinja/lexer.h"
#include "engine/error.h"

namespace kvdesk::jinja {
namespace {

// Deeper nesting than this is no chat template's; it bounds the parser's and the
// interpreter's recursion.
constexpr int kMaxDepth = 200;

using Type = Token::Type;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_body({});
    if (peek().type != Type::End) fail("{% " + peek_name(1) + " %} has no statement it closes");
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  std::string peek_name(size_t ahead) const { return peek(ahead).type == Type::Name ? peek(ahead).value : "?"; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("chat template line " + std::to_string(peek().line) + ": " + what);
  }

  bool at_operator(std::string_view op) const { return peek().type == Type::Operator && peek().value == op; }
  bool at_name(std::string_view name) const { return peek().type == Type::Name && peek().value == name; }
  bool accept_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  void expect_operator(std::string_view op) {
    if (!accept_operator(op)) fail("expected '" + std::string(op) + "', found " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().type != Type::Name) fail("expected a name, found " + describe(peek()));
    return next().value;
  }
  void expect(Type type, const char* what) {
    if (peek().type != type) fail(std::string("expected ") + what + ", found " + describe(peek()));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Type::Text: return "template text";
      case Type::ExprOpen: return "'{{'";
      case Type::ExprClose: return "'}}'";
      case Type::StmtOpen: return "'{%'";
      case Type::StmtClose: return "'%}'";
      case Type::End: return "the end of the template";
      case Type::String: return "a string";
      default: return "'" + t.value + "'";
    }
  }

  // Guards recursion: one per nested statement or expression level.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.fail("the template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  ExprPtr node(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Sets a finished node's depth from its children's: a chain such as a + a + ... + a
  // nests one level per operator, and evaluating or freeing it recurses as deep.
  ExprPtr finished(ExprPtr e) {
    int below = 0;
    for (const ExprPtr& a : e->args) below = std::max(below, a ? a->depth : 0);
    for (const auto& [name, a] : e->named) below = std::max(below, a->depth);
    e->depth = below + 1;
    if (e->depth > kMaxDepth) fail("an expression nests deeper than " + std::to_string(kMaxDepth) + " levels");
    return e;
  }
  ExprPtr unary(Expr::Kind kind, int line, ExprPtr a) {
    ExprPtr e = node(kind, line);
    e->args.push_back(std::move(a));
    return finished(std::move(e));
  }
  ExprPtr binary(Expr::Kind kind, std::string op, int line, ExprPtr a, ExprPtr b) {
    ExprPtr e = node(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return finished(std::move(e));
  }

  // ---- statements ----

  // Statements until a {% name %} in `ends` (not consumed) or the end.
  Body parse_body(std::initializer_list<std::string_view> ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Type::End) {
        if (ends.size() != 0) fail("the template ends inside a block: {% " + std::string(*(ends.end() - 1)) + " %} is missing");
        return body;
      }
      if (t.type == Type::Text) {
        body.push_back(text_stmt(next()));
      } else if (t.type == Type::ExprOpen) {
        next();
        auto s = stmt(Stmt::Kind::Output, t.line);
        s->expr = parse_tuple(true);
        expect(Type::ExprClose, "'}}'");
        body.push_back(std::move(s));
      } else if (t.type == Type::StmtOpen) {
        for (std::string_view end : ends) {
          if (peek(1).type == Type::Name && peek(1).value == end) return body;
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  StmtPtr text_stmt(const Token& t) {
    StmtPtr s = stmt(Stmt::Kind::Text, t.line);
    s->text = t.value;
    return s;
  }

  // {% name %} closing a block: consumes it.
  void end_tag(std::string_view name) {
    expect(Type::StmtOpen, "'{%'");
    if (!accept_name(name)) fail("expected {% " + std::string(name) + " %}");
    expect(Type::StmtClose, "'%}'");
  }

  StmtPtr parse_statement() {
    const int line = peek().line;
    const std::string keyword = expect_name();
    if (keyword == "if") return parse_if(line);
    if (keyword == "for") return parse_for(line);
    if (keyword == "set") return parse_set(line);
    if (keyword == "macro") return parse_macro(line);
    if (keyword == "call") return parse_call_block(line);
    if (keyword == "filter") return parse_filter_block(line);
    if (keyword == "generation") return parse_scope(line, "endgeneration");
    if (keyword == "break" || keyword == "continue") {
      expect(Type::StmtClose, "'%}'");
      return stmt(keyword == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
    }
    if (keyword == "do") {
      StmtPtr s = stmt(Stmt::Kind::Do, line);
      s->expr = parse_tuple(true);
      expect(Type::StmtClose, "'%}'");
      return s;
    }
    fail("unknown statement {% " + keyword + " %}");
  }

  StmtPtr parse_if(int line) {
    StmtPtr s = stmt(Stmt::Kind::If, line);
    s->conditions.push_back(parse_tuple(true));
    expect(Type::StmtClose, "'%}'");
    while (true) {
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      next();
      const std::string tag = expect_name();
      if (tag == "elif") {
        s->conditions.push_back(parse_tuple(true));
        expect(Type::StmtClose, "'%}'");
      } else if (tag == "else") {
        expect(Type::StmtClose, "'%}'");
        s->bodies.push_back(parse_body({"endif"}));
        end_tag("endif");
        return s;
      } else {
        expect(Type::StmtClose, "'%}'");
        return s;
      }
    }
  }

  std::vector<Target> parse_targets() {
    std::vector<Target> targets;
    const bool parenthesized = accept_operator("(");
    do {
      Target t{expect_name(), ""};
      if (accept_operator(".")) t.attribute = expect_name();
      targets.push_back(std::move(t));
    } while (accept_operator(","));
    if (parenthesized) expect_operator(")");
    return targets;
  }

  StmtPtr parse_for(int line) {
    StmtPtr s = stmt(Stmt::Kind::For, line);
    s->targets = parse_targets();
    if (!accept_name("in")) fail("expected 'in' in a for loop");
    s->expr = parse_tuple(false);
    if (accept_name("if")) s->condition = parse_expression(false);
    accept_name("recursive");
    expect(Type::StmtClose, "'%}'");
    const size_t body_start = pos_;
    s->bodies.push_back(parse_body({"else", "endfor"}));
    s->uses_loop = names_loop(body_start, pos_);
    if (peek(1).value == "else") {
      end_tag("else");
      s->bodies.push_back(parse_body({"endfor"}));
    }
    end_tag("endfor");
    return s;
  }

  StmtPtr parse_set(int line) {
    std::vector<Target> targets = parse_targets();
    if (accept_operator("=")) {
      StmtPtr s = stmt(Stmt::Kind::Set, line);
      s->targets = std::move(targets);
      s->expr = parse_tuple(true);
      expect(Type::StmtClose, "'%}'");
      return s;
    }
    StmtPtr s = stmt(Stmt::Kind::SetBlock, line);
    s->targets = std::move(targets);
    s->filters = parse_filter_chain(true);
    expect(Type::StmtClose, "'%}'");
    s->bodies.push_back(parse_body({"endset"}));
    end_tag("endset");
    return s;
  }

  std::vector<Parameter> parse_parameters() {
    std::vector<Parameter> params;
    expect_operator("(");
    while (!accept_operator(")")) {
      if (!params.empty()) expect_operator(",");
      if (accept_operator(")")) break;
      Parameter p{expect_name(), nullptr};
      if (accept_operator("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    return params;
  }

  StmtPtr parse_macro(int line) {
    StmtPtr s = stmt(Stmt::Kind::Macro, line);
    s->name = expect_name();
    s->parameters = parse_parameters();
    expect(Type::StmtClose, "'%}'");
    s->bodies.push_back(parse_body({"endmacro"}));
    end_tag("endmacro");
    return s;
  }

  StmtPtr parse_call_block(int line) {
    StmtPtr s = stmt(Stmt::Kind::CallBlock, line);
    if (at_operator("(")) s->parameters = parse_parameters();
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) fail("{% call %} needs a macro call");
    expect(Type::StmtClose, "'%}'");
    s->bodies.push_back(parse_body({"endcall"}));
    end_tag("endcall");
    return s;
  }

  // `name(args) | name2 ...` after {% filter %}, or `| name ...` after {% set x %}: Filter nodes
  // without input.
  std::vector<ExprPtr> parse_filter_chain(bool leading_bar) {
    std::vector<ExprPtr> filters;
    if (!leading_bar) filters.push_back(parse_filter_call(nullptr));
    while (accept_operator("|")) filters.push_back(parse_filter_call(nullptr));
    return filters;
  }

  StmtPtr parse_filter_block(int line) {
    StmtPtr s = stmt(Stmt::Kind::FilterBlock, line);
    s->filters = parse_filter_chain(false);
    expect(Type::StmtClose, "'%}'");
    s->bodies.push_back(parse_body({"endfilter"}));
    end_tag("endfilter");
    return s;
  }

  StmtPtr parse_scope(int line, std::string_view end) {
    StmtPtr s = stmt(Stmt::Kind::Scope, line);
    expect(Type::StmtClose, "'%}'");
    s->bodies.push_back(parse_body({end}));
    end_tag(end);
    return s;
  }

  // ---- expressions ----

  // Expressions separated by commas make a tuple (`{% set a, b = 1, 2 %}`).
  ExprPtr parse_tuple(bool with_conditional) {
    const int line = peek().line;
    ExprPtr first = parse_expression(with_conditional);
    if (!at_operator(",")) return first;
    ExprPtr tuple = node(Expr::Kind::Tuple, line);
    tuple->args.push_back(std::move(first));
    while (accept_operator(",")) {
      if (peek().type == Type::StmtClose || peek().type == Type::ExprClose) break;
      tuple->args.push_back(parse_expression(with_conditional));
    }
    return finished(std::move(tuple));
  }

  ExprPtr parse_expression(bool with_conditional) {
    DepthGuard guard(*this);
    return with_conditional ? parse_conditional() : parse_or();
  }

  ExprPtr parse_conditional() {
    ExprPtr value = parse_or();
    while (at_name("if")) {
      const int line = next().line;
      ExprPtr e = node(Expr::Kind::Conditional, line);
      e->args.push_back(parse_or());
      e->args.insert(e->args.begin() + 1, std::move(value));
      e->args.push_back(accept_name("else") ? parse_conditional() : nullptr);
      value = finished(std::move(e));
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      left = binary(Expr::Kind::Or, "or", line, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      left = binary(Expr::Kind::And, "and", line, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this);
      const int line = next().line;
      return unary(Expr::Kind::Not, line, parse_not());
    }
    return parse_compare();
  }

  // Comparisons chain as in Python: a < b < c is a < b and b < c (b computed twice here).
  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    static constexpr std::string_view kOps[] = {"==", "!=", "<", "<=", ">", ">="};
    while (true) {
      const int line = peek().line;
      std::string op;
      for (std::string_view o : kOps) {
        if (at_operator(o)) op = o;
      }
      if (!op.empty()) {
        next();
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && peek(1).type == Type::Name && peek(1).value == "in") {
        next();
        next();
        op = "not in";
      } else {
        return left;
      }
      left = binary(Expr::Kind::Binary, op, line, std::move(left), parse_math1());
    }
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const Token& t = next();
      left = binary(Expr::Kind::Binary, t.value, t.line, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_operator("~")) {
      const int line = next().line;
      left = binary(Expr::Kind::Binary, "~", line, std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const Token& t = next();
      left = binary(Expr::Kind::Binary, t.value, t.line, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_operator("**")) {
      const int line = next().line;
      left = binary(Expr::Kind::Binary, "**", line, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const int line = peek().line;
    ExprPtr value;
    if (accept_operator("-")) {
      value = unary(Expr::Kind::Negate, line, parse_unary(false));
    } else if (accept_operator("+")) {
      value = unary(Expr::Kind::Plus, line, parse_unary(false));
    } else {
      value = parse_postfix(parse_primary());
    }
    if (!with_filter) return value;
    return parse_filters_and_tests(std::move(value));
  }

  ExprPtr parse_primary() {
    const Token& t = next();
    switch (t.type) {
      case Type::Name: return name_or_constant(t);
      case Type::String: {
        std::string s = t.value;
        while (peek().type == Type::String) s += next().value;   // adjacent literals join
        ExprPtr e = node(Expr::Kind::Literal, t.line);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case Type::Integer: {
        ExprPtr e = node(Expr::Kind::Literal, t.line);
        errno = 0;
        const long long v = std::strtoll(t.value.c_str(), nullptr, 10);
        e->literal = errno == ERANGE ? Value::number(std::strtod(t.value.c_str(), nullptr)) : Value::integer(v);
        return e;
      }
      case Type::Float: {
        ExprPtr e = node(Expr::Kind::Literal, t.line);
        e->literal = Value::number(std::strtod(t.value.c_str(), nullptr));
        return e;
      }
      case Type::Operator:
        if (t.value == "(") return parse_parenthesized(t.line);
        if (t.value == "[") return parse_list(t.line);
        if (t.value == "{") return parse_dict(t.line);
        break;
      default: break;
    }
    --pos_;
    fail("unexpected " + describe(t) + " in an expression");
  }

  ExprPtr name_or_constant(const Token& t) {
    ExprPtr e = node(Expr::Kind::Literal, t.line);
    if (t.value == "true" || t.value == "True") {
      e->literal = Value::boolean(true);
    } else if (t.value == "false" || t.value == "False") {
      e->literal = Value::boolean(false);
    } else if (t.value == "none" || t.value == "None") {
      e->literal = Value::none();
    } else {
      e->kind = Expr::Kind::Name;
      e->name = t.value;
    }
    return e;
  }

  ExprPtr parse_parenthesized(int line) {
    if (accept_operator(")")) return node(Expr::Kind::Tuple, line);
    ExprPtr first = parse_expression(true);
    if (accept_operator(")")) return first;
    ExprPtr tuple = node(Expr::Kind::Tuple, line);
    tuple->args.push_back(std::move(first));
    while (accept_operator(",")) {
      if (at_operator(")")) break;
      tuple->args.push_back(parse_expression(true));
    }
    expect_operator(")");
    return finished(std::move(tuple));
  }

  ExprPtr parse_list(int line) {
    ExprPtr list = node(Expr::Kind::List, line);
    while (!accept_operator("]")) {
      if (!list->args.empty()) expect_operator(",");
      if (accept_operator("]")) break;
      list->args.push_back(parse_expression(true));
    }
    return finished(std::move(list));
  }

  ExprPtr parse_dict(int line) {
    ExprPtr dict = node(Expr::Kind::Dict, line);
    while (!accept_operator("}")) {
      if (!dict->args.empty()) expect_operator(",");
      if (accept_operator("}")) break;
      dict->args.push_back(parse_expression(true));
      expect_operator(":");
      dict->args.push_back(parse_expression(true));
    }
    return finished(std::move(dict));
  }

  ExprPtr parse_postfix(ExprPtr value) {
    while (true) {
      const int line = peek().line;
      if (accept_operator(".")) {
        ExprPtr e = node(Expr::Kind::Attribute, line);
        if (peek().type == Type::Integer) {
          e->kind = Expr::Kind::Item;
          e->args.push_back(std::move(value));
          ExprPtr index = node(Expr::Kind::Literal, line);
          index->literal = Value::integer(std::strtoll(next().value.c_str(), nullptr, 10));
          e->args.push_back(std::move(index));
        } else {
          e->name = expect_name();
          e->args.push_back(std::move(value));
        }
        value = finished(std::move(e));
      } else if (accept_operator("[")) {
        value = parse_subscript(std::move(value), line);
      } else if (at_operator("(")) {
        value = parse_call(std::move(value), line);
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr value, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    for (int k = 0; k < 3; ++k) {
      if (!at_operator(":") && !at_operator("]")) parts[k] = parse_expression(true);
      if (k < 2 && accept_operator(":")) {
        is_slice = true;
        continue;
      }
      break;
    }
    expect_operator("]");
    ExprPtr e = node(is_slice ? Expr::Kind::Slice : Expr::Kind::Item, line);
    e->args.push_back(std::move(value));
    if (!is_slice && !parts[0]) fail("an empty subscript []");
    for (int k = 0; k < (is_slice ? 3 : 1); ++k) e->args.push_back(std::move(parts[k]));
    return finished(std::move(e));
  }

  // (args) after a callee, filter or test: positional then name=value arguments.
  void parse_arguments(Expr& e) {
    expect_operator("(");
    bool first = true;
    while (!accept_operator(")")) {
      if (!first) expect_operator(",");
      first = false;
      if (accept_operator(")")) break;
      if (peek().type == Type::Name && peek(1).type == Type::Operator && peek(1).value == "=") {
        std::string name = next().value;
        next();
        e.named.emplace_back(std::move(name), parse_expression(true));
      } else {
        e.args.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee, int line) {
    ExprPtr e = node(Expr::Kind::Call, line);
    e->args.push_back(std::move(callee));
    parse_arguments(*e);
    return finished(std::move(e));
  }

  // A filter `name` or `name(args)` applied to input (null inside {% filter %}).
  ExprPtr parse_filter_call(ExprPtr input) {
    const int line = peek().line;
    ExprPtr e = node(Expr::Kind::Filter, line);
    e->name = expect_name();
    while (accept_operator(".")) e->name += "." + expect_name();
    e->args.push_back(std::move(input));
    if (at_operator("(")) parse_arguments(*e);
    return finished(std::move(e));
  }

  ExprPtr parse_filters_and_tests(ExprPtr value) {
    while (true) {
      if (accept_operator("|")) {
        value = parse_postfix(parse_filter_call(std::move(value)));
      } else if (at_name("is")) {
        value = parse_test(std::move(value));
      } else if (at_operator("(")) {
        value = parse_call(std::move(value), peek().line);
      } else {
        return value;
      }
    }
  }

  // `is [not] name`, `is name(args)` or `is name arg` (one argument without parentheses).
  ExprPtr parse_test(ExprPtr value) {
    const int line = next().line;
    ExprPtr e = node(Expr::Kind::Test, line);
    e->negated = accept_name("not");
    e->name = expect_name();
    while (accept_operator(".")) e->name += "." + expect_name();
    e->args.push_back(std::move(value));
    if (at_operator("(")) {
      parse_arguments(*e);
    } else if (starts_bare_test_argument()) {
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return finished(std::move(e));
  }

  bool starts_bare_test_argument() const {
    const Token& t = peek();
    if (t.type == Type::Name) return t.value != "else" && t.value != "or" && t.value != "and" && t.value != "if" && t.value != "is" && t.value != "in" && t.value != "not";
    if (t.type == Type::String || t.type == Type::Integer || t.type == Type::Float) return true;
    return t.type == Type::Operator && (t.value == "[" || t.value == "{");
  }

  // Whether tokens [begin, end) name `loop` (a macro or loop inside may mean its own; building
  // the object anyway is only slower).
  bool names_loop(size_t begin, size_t end) const {
    for (size_t i = begin; i < end; ++i) {
      if (tokens_[i].type == Type::Name && tokens_[i].value == "loop") return true;
    }
    return false;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(lex_template(source)).parse(); }

}  // namespace kvdesk::jinja
