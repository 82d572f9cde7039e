// The parsed template: expressions and statements as trees. One node type each, its kind saying
// how its children read (written next to each kind), so the parser and the interpreter share
// one small vocabulary.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/jinja/value.h"

namespace kvdesk::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    Literal,       // literal
    Name,          // name
    List,          // args: items
    Tuple,         // args: items
    Dict,          // args: key, value, key, value, ...
    Attribute,     // args[0].name
    Item,          // args[0][args[1]]
    Slice,         // args[0][args[1]:args[2]:args[3]], absent parts null
    Call,          // args[0](args[1..], named)
    Filter,        // args[0] | name(args[1..], named)
    Test,          // args[0] is [not: negated] name(args[1..])
    Not,           // not args[0]
    Negate,        // -args[0]
    Plus,          // +args[0]
    Binary,        // args[0] name args[1], name one of + - * / // % ** ~ == != < <= > >= in "not in"
    And,           // args[0] and args[1]
    Or,            // args[0] or args[1]
    Conditional,   // args[1] if args[0] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int depth = 1;   // levels of the tree under and with this node (bounded by the parser)
  std::string name;
  Value literal;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> named;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where `set` and `for` put a value: a name, or an attribute of a namespace (`ns.count`).
struct Target {
  std::string name;
  std::string attribute;   // non-empty: set name.attribute
};

// A macro's parameter and its default (null: required, undefined when not passed).
struct Parameter {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind : uint8_t {
    Text,         // text
    Output,       // {{ expr }}
    If,           // conditions[i] -> bodies[i]; bodies.back() without a condition: else
    For,          // for targets in expr [if condition]: bodies[0]; else bodies[1]; uses_loop: the
                  // body names `loop` (else no loop object is built per item)
    Set,          // set targets = expr
    SetBlock,     // set targets[0] | filters: bodies[0] captured
    Macro,        // macro name(parameters): bodies[0]
    CallBlock,    // call(parameters) expr: bodies[0] is caller()
    FilterBlock,  // filter filters: bodies[0]
    Break,
    Continue,
    Do,           // do expr
    Scope,        // bodies[0] as it is ({% generation %} of transformers' assistant tracking)
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<ExprPtr> conditions;
  std::vector<Target> targets;
  std::vector<Parameter> parameters;
  std::vector<ExprPtr> filters;   // Filter nodes whose args[0] is null: applied to the captured text
  std::vector<Body> bodies;
  bool uses_loop = true;
};

}  // namespace kvdesk::jinja
