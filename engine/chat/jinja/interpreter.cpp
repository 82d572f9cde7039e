// Statements run against a stack of scopes and a stack of outputs; expressions evaluate
// recursively (their depth is bounded by the parser and counted here with macro calls).
#include "engine/chat/jinja/interpreter.h"

#include <iterator>

#include "engine/chat/jinja/builtins.h"
#include "engine/error.h"

namespace kvdesk::jinja {

struct NestingGuard {
  explicit NestingGuard(Interpreter& in) : interpreter(in) {
    if (++interpreter.nesting_ > interpreter.limits_.max_nesting) {
      interpreter.fail("the template nests deeper than " + std::to_string(interpreter.limits_.max_nesting) +
                       " levels (a macro calling itself without end?)");
    }
  }
  ~NestingGuard() { --interpreter.nesting_; }
  Interpreter& interpreter;
};

Interpreter::Interpreter(const RenderLimits& limits, const std::tm& now) : limits_(limits), now_(now) {}

Text Interpreter::render(const Body& body, const Dict& context) {
  Dict globals;
  add_global_functions(globals);
  frames_.assign(1, {});
  for (const auto& [k, v] : globals.entries) frames_[0].emplace_back(k.str(), v);
  for (const auto& [k, v] : context.entries) {
    if (k.is_string()) set_variable(k.str(), v);
  }
  Text out;
  outputs_.assign(1, &out);
  steps_ = 0;
  nesting_ = 0;
  exec_body(body);
  return out;
}

void Interpreter::fail(const std::string& what) const {
  throw Error("chat template line " + std::to_string(line_) + ": " + what);
}

void Interpreter::check_size(size_t size, bool is_string) const {
  if (is_string ? size > limits_.max_output_bytes : size > limits_.max_items) {
    fail(is_string ? "a string grows past " + std::to_string(limits_.max_output_bytes) + " bytes"
                   : "a list grows past " + std::to_string(limits_.max_items) + " items");
  }
}

void Interpreter::charge(size_t items) {
  steps_ += items;
  step();
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) fail("the template runs more than " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::emit(const Text& text) {
  Text& out = *outputs_.back();
  check_size(out.bytes.size() + text.bytes.size(), true);
  out.append(text);
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
    for (const auto& [n, v] : *frame) {
      if (n == name) return v;
    }
  }
  return Value::undefined(name);
}

void Interpreter::set_variable(const std::string& name, Value value) {
  Frame& frame = frames_.back();
  for (auto& [n, v] : frame) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  frame.emplace_back(name, std::move(value));
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const StmtPtr& s : body) {
    const Flow flow = exec(*s);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::Text: emit(Text(s.text)); break;
    case Stmt::Kind::Output: emit(eval(*s.expr).to_text()); break;
    case Stmt::Kind::If: return exec_if(s);
    case Stmt::Kind::For: return exec_for(s);
    case Stmt::Kind::Set: exec_set(s); break;
    case Stmt::Kind::SetBlock: exec_set_block(s); break;
    case Stmt::Kind::Macro: define_macro(s); break;
    case Stmt::Kind::CallBlock: exec_call_block(s); break;
    case Stmt::Kind::FilterBlock: exec_filter_block(s); break;
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::Do: eval(*s.expr); break;
    case Stmt::Kind::Scope: return exec_body(s.bodies[0]);
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_if(const Stmt& s) {
  NestingGuard guard(*this);
  for (size_t i = 0; i < s.conditions.size(); ++i) {
    line_ = s.conditions[i]->line;
    if (eval(*s.conditions[i]).truthy()) return exec_body(s.bodies[i]);
  }
  if (s.bodies.size() > s.conditions.size()) return exec_body(s.bodies.back());
  return Flow::Normal;
}

namespace {

// loop.* for item i of items; loop.cycle(a, b, ...) picks by i. The keys are made once: a loop
// over a string's characters builds one of these per character.
Value loop_object(const ValueList& items, size_t i) {
  static const Value kKeys[] = {Value::string("index"),    Value::string("index0"), Value::string("revindex"),
                                Value::string("revindex0"), Value::string("first"),  Value::string("last"),
                                Value::string("length"),   Value::string("depth"),  Value::string("depth0"),
                                Value::string("previtem"), Value::string("nextitem"), Value::string("cycle")};
  const auto n = int64_t(items.size());
  const auto k = int64_t(i);
  const Value cycle = Value::function("loop.cycle", [i](const CallArgs& args, Interpreter&) {
    return args.positional.empty() ? Value::undefined("loop.cycle") : args.positional[i % args.positional.size()];
  });
  const Value values[] = {Value::integer(k + 1),
                          Value::integer(k),
                          Value::integer(n - k),
                          Value::integer(n - k - 1),
                          Value::boolean(k == 0),
                          Value::boolean(k == n - 1),
                          Value::integer(n),
                          Value::integer(1),
                          Value::integer(0),
                          k > 0 ? items[i - 1] : Value::undefined("loop.previtem"),
                          k + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"),
                          cycle};
  auto loop = std::make_shared<Dict>();
  loop->entries.reserve(std::size(kKeys));
  for (size_t key = 0; key < std::size(kKeys); ++key) loop->entries.emplace_back(kKeys[key], values[key]);
  return Value::dict(loop);
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
  NestingGuard guard(*this);
  const int line = s.line;
  ValueList all = iterate(*this, eval(*s.expr));
  ValueList items;
  if (s.condition) {
    // The loop's `if` filters before the loop: loop.length and loop.last count what passes.
    for (const Value& item : all) {
      frames_.emplace_back();
      assign_targets(s.targets, item);
      const bool keep = eval(*s.condition).truthy();
      frames_.pop_back();
      if (keep) items.push_back(item);
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) return s.bodies.size() > 1 ? exec_body(s.bodies[1]) : Flow::Normal;
  for (size_t index = 0; index < items.size(); ++index) {
    step();
    line_ = line;
    frames_.emplace_back();
    if (s.uses_loop) set_variable("loop", loop_object(items, index));
    assign_targets(s.targets, items[index]);
    const Flow flow = exec_body(s.bodies[0]);
    frames_.pop_back();
    if (flow == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::assign(const Target& target, Value value) {
  if (target.attribute.empty()) {
    set_variable(target.name, std::move(value));
    return;
  }
  const Value object = lookup(target.name);
  if (!object.is_dict() || !object.dict_ref().is_namespace) {
    fail("cannot assign attribute '" + target.attribute + "' on '" + target.name + "', which is not a namespace()");
  }
  object.dict_ref().set(Value::string(target.attribute), std::move(value));
}

void Interpreter::assign_targets(const std::vector<Target>& targets, const Value& value) {
  if (targets.size() == 1) {
    assign(targets[0], value);
    return;
  }
  const ValueList parts = iterate(*this, value);
  if (parts.size() != targets.size()) {
    fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], parts[i]);
}

void Interpreter::exec_set(const Stmt& s) { assign_targets(s.targets, eval(*s.expr)); }

Text Interpreter::capture(const Body& body) {
  Text out;
  outputs_.push_back(&out);
  exec_body(body);
  outputs_.pop_back();
  return out;
}

Value Interpreter::apply_filter_chain(const std::vector<ExprPtr>& filters, Value input) {
  for (const ExprPtr& f : filters) input = eval_filter(*f, std::move(input));
  return input;
}

void Interpreter::exec_set_block(const Stmt& s) {
  NestingGuard guard(*this);
  const Value text = Value::string(capture(s.bodies[0]));
  assign(s.targets[0], apply_filter_chain(s.filters, text));
}

void Interpreter::exec_filter_block(const Stmt& s) {
  NestingGuard guard(*this);
  const Value text = Value::string(capture(s.bodies[0]));
  emit(apply_filter_chain(s.filters, text).to_text());
}

// A macro is a function over its parameters; it renders its body with the template's top
// level and its arguments in scope and returns the text (provenance kept).
void Interpreter::define_macro(const Stmt& s) {
  const Stmt* macro = &s;
  set_variable(s.name, Value::function(s.name, [macro](const CallArgs& args, Interpreter& in) {
    return in.call_macro(*macro, args);
  }));
}

Value Interpreter::call_macro(const Stmt& macro, const CallArgs& args) {
  NestingGuard guard(*this);
  step();
  std::vector<Frame> saved = std::move(frames_);
  frames_ = {saved.front(), {}};
  ValueList varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < macro.parameters.size()) {
      set_variable(macro.parameters[i].name, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  auto kwargs = std::make_shared<Dict>();
  for (const auto& [name, value] : args.named) {
    bool is_parameter = false;
    for (const Parameter& p : macro.parameters) is_parameter = is_parameter || p.name == name;
    if (is_parameter) {
      set_variable(name, value);
    } else if (name == "caller") {
      set_variable("caller", value);
    } else {
      kwargs->set(Value::string(name), value);
    }
  }
  for (size_t i = args.positional.size(); i < macro.parameters.size(); ++i) {
    const Parameter& p = macro.parameters[i];
    bool passed = false;
    for (const auto& [name, value] : args.named) passed = passed || name == p.name;
    if (!passed) set_variable(p.name, p.default_value ? eval(*p.default_value) : Value::undefined(p.name));
  }
  set_variable("varargs", Value::list(std::move(varargs)));
  set_variable("kwargs", Value::dict(kwargs));
  const int line = line_;
  Text out = capture(macro.bodies[0]);
  saved.front() = std::move(frames_.front());
  frames_ = std::move(saved);
  line_ = line;
  return Value::string(std::move(out));
}

// {% call(params) macro(args) %}body{% endcall %}: the macro runs with caller() rendering body.
void Interpreter::exec_call_block(const Stmt& s) {
  const Stmt* block = &s;
  const Value caller = Value::function("caller", [block](const CallArgs& args, Interpreter& in) {
    return in.call_macro(*block, args);
  });
  const Expr& call = *s.expr;
  const Value callee = eval(*call.args[0]);
  CallArgs args = eval_arguments(call, 1);
  args.named.emplace_back("caller", caller);
  emit(this->call(callee, args).to_text());
}

// ---- expressions ----

Value Interpreter::eval(const Expr& e) {
  NestingGuard guard(*this);
  switch (e.kind) {
    case Expr::Kind::Literal: return e.literal;
    case Expr::Kind::Name: return lookup(e.name);
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      ValueList items;
      for (const ExprPtr& a : e.args) items.push_back(eval(*a));
      return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      auto dict = std::make_shared<Dict>();
      charge(e.args.size() * e.args.size() / 16);
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) dict->set(eval(*e.args[i]), eval(*e.args[i + 1]));
      return Value::dict(dict);
    }
    case Expr::Kind::Attribute: return get_attribute(*this, eval(*e.args[0]), e.name);
    case Expr::Kind::Item: return get_item(*this, eval(*e.args[0]), eval(*e.args[1]));
    case Expr::Kind::Slice: {
      const Value object = eval(*e.args[0]);
      const auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k]) : Value::none(); };
      return slice(*this, object, part(1), part(2), part(3));
    }
    case Expr::Kind::Call: return eval_call(e);
    case Expr::Kind::Filter: return eval_filter(e, eval(*e.args[0]));
    case Expr::Kind::Test: return Value::boolean(eval_test(e));
    case Expr::Kind::Not: return Value::boolean(!eval(*e.args[0]).truthy());
    case Expr::Kind::Negate:
      return binary_operator(*this, "-", Value::integer(0), eval(*e.args[0]));
    case Expr::Kind::Plus: return binary_operator(*this, "+", Value::integer(0), eval(*e.args[0]));
    case Expr::Kind::And: {
      Value left = eval(*e.args[0]);
      return left.truthy() ? eval(*e.args[1]) : left;
    }
    case Expr::Kind::Or: {
      Value left = eval(*e.args[0]);
      return left.truthy() ? left : eval(*e.args[1]);
    }
    case Expr::Kind::Conditional:
      if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("");
    case Expr::Kind::Binary: return eval_binary(e);
  }
  return {};
}

Value Interpreter::eval_binary(const Expr& e) {
  const Value a = eval(*e.args[0]);
  const Value b = eval(*e.args[1]);
  line_ = e.line;
  if (e.name == "==") return Value::boolean(a.equals(b));
  if (e.name == "!=") return Value::boolean(!a.equals(b));
  if (e.name == "in") return Value::boolean(contains(*this, b, a));
  if (e.name == "not in") return Value::boolean(!contains(*this, b, a));
  return binary_operator(*this, e.name, a, b);
}

CallArgs Interpreter::eval_arguments(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [name, value] : e.named) args.named.emplace_back(name, eval(*value));
  return args;
}

Value Interpreter::eval_call(const Expr& e) {
  const Value callee = eval(*e.args[0]);
  const CallArgs args = eval_arguments(e, 1);
  line_ = e.line;
  return call(callee, args);
}

Value Interpreter::call(const Value& callee, const CallArgs& args) {
  step();
  if (!callee.is_function()) {
    if (callee.is_undefined()) {
      fail("'" + (callee.undefined_name().empty() ? std::string("value") : callee.undefined_name()) +
           "' is undefined and cannot be called");
    }
    fail("'" + std::string(callee.type_name()) + "' object is not callable");
  }
  return callee.function_ref().call(args, *this);
}

Value Interpreter::eval_filter(const Expr& e, Value input) {
  const CallArgs args = eval_arguments(e, 1);
  line_ = e.line;
  return filter(e.name, input, args);
}

Value Interpreter::filter(const std::string& name, const Value& input, const CallArgs& args) {
  step();
  const FilterFunction f = find_filter(name);
  if (!f) fail("no filter named '" + name + "'");
  return f(*this, input, args);
}

bool Interpreter::eval_test(const Expr& e) {
  const Value input = eval(*e.args[0]);
  const CallArgs args = eval_arguments(e, 1);
  line_ = e.line;
  return test(e.name, input, args) != e.negated;
}

bool Interpreter::test(const std::string& name, const Value& input, const CallArgs& args) {
  const TestFunction t = find_test(name);
  if (!t) fail("no test named '" + name + "'");
  return t(*this, input, args);
}

}  // namespace kvdesk::jinja
