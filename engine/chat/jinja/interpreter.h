// The interpreter: runs a parsed template over a context (the variables the caller passes:
// messages, tools, bos_token, add_generation_prompt, ...) with Jinja2's scoping (a for loop's
// body is a new scope each iteration, an if is not, a macro sees the template's top level and
// its arguments) and its Undefined (prints empty, is false, iterates as nothing; an attribute
// of it is an error).
//
// A template from a downloaded file is untrusted: RenderLimits bound its steps, its output and
// any string or list it builds, and its nesting, so a hostile one fails with a message instead
// of hanging or exhausting the app.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "engine/chat/jinja/ast.h"
#include "engine/chat/jinja/value.h"

namespace kvdesk::jinja {

struct RenderLimits {
  uint64_t max_steps = 20'000'000;          // statements, loop iterations and calls
  size_t max_output_bytes = 64u << 20;      // the rendered text, and any one string
  size_t max_items = 4u << 20;              // any one list, dict or range
  int max_nesting = 400;                    // evaluation depth, macro calls included
};

class Interpreter {
 public:
  Interpreter(const RenderLimits& limits, const std::tm& now);

  // Renders body with `context` (a dict) as its variables, plus the global functions.
  Text render(const Body& body, const Dict& context);

  // For the builtins: calls, filters and tests by name, errors at the current line.
  Value call(const Value& callee, const CallArgs& args);
  Value filter(const std::string& name, const Value& input, const CallArgs& args);
  bool test(const std::string& name, const Value& input, const CallArgs& args);
  [[noreturn]] void fail(const std::string& what) const;
  // A string or list size the limits allow; fails otherwise.
  void check_size(size_t bytes_or_items, bool is_string) const;
  // Counts work proportional to a value's size (a copy, a scan) against max_steps, so a loop
  // that grows and copies a string, list or dict each time cannot run for hours: one step per
  // item, or per 64 bytes.
  void charge(size_t items);
  const std::tm& now() const { return now_; }
  const RenderLimits& limits() const { return limits_; }

 private:
  enum class Flow : uint8_t { Normal, Break, Continue };
  using Frame = std::vector<std::pair<std::string, Value>>;

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_if(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  void exec_set_block(const Stmt& s);
  void exec_filter_block(const Stmt& s);
  void exec_call_block(const Stmt& s);
  void define_macro(const Stmt& s);
  Value call_macro(const Stmt& macro, const CallArgs& args);
  Text capture(const Body& body);
  Value apply_filter_chain(const std::vector<ExprPtr>& filters, Value input);
  void assign(const Target& target, Value value);
  void assign_targets(const std::vector<Target>& targets, const Value& value);

  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e, Value input);
  bool eval_test(const Expr& e);
  CallArgs eval_arguments(const Expr& e, size_t first);
  Value lookup(const std::string& name) const;
  void set_variable(const std::string& name, Value value);
  void emit(const Text& text);
  void step();

  RenderLimits limits_;
  std::tm now_;
  std::vector<Frame> frames_;       // [scopes] frames_[0]: the context and top-level sets
  std::vector<Text*> outputs_;      // [captures] where text goes: the render's, a macro's, ...
  uint64_t steps_ = 0;
  int nesting_ = 0;
  int line_ = 0;                    // the template line being run, for messages
  friend struct NestingGuard;
};

}  // namespace kvdesk::jinja
