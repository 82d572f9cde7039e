// A Jinja chat template, parsed once and rendered per conversation: the engine that renders
// a model's own tokenizer.chat_template as Hugging Face's transformers does (Python's Jinja2
// with trim_blocks and lstrip_blocks, its tojson, raise_exception and strftime_now).
#pragma once
#include <ctime>
#include <memory>
#include <string>

#include "engine/chat/jinja/ast.h"
#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/jinja/value.h"

namespace kvdesk::jinja {

class Template {
 public:
  // Parses source; throws kvdesk::Error naming the line of a syntax error.
  explicit Template(std::string source);

  const std::string& source() const { return source_; }
  // Renders with the variables of `context` (a dict); `now` is the date strftime_now() shows.
  // Throws kvdesk::Error naming the template line for raise_exception() and other failures.
  Text render(const Dict& context, const std::tm& now, const RenderLimits& limits = {}) const;

 private:
  std::string source_;
  std::shared_ptr<const Body> body_;
};

}  // namespace kvdesk::jinja
