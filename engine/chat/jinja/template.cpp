// Template: the parser's tree kept shared, so copies of a ChatTemplate render the same tree.
#include "engine/chat/jinja/template.h"

#include "engine/chat/jinja/parser.h"

namespace kvdesk::jinja {

Template::Template(std::string source)
    : source_(std::move(source)), body_(std::make_shared<const Body>(parse_template(source_))) {}

Text Template::render(const Dict& context, const std::tm& now, const RenderLimits& limits) const {
  Interpreter interpreter(limits, now);
  return interpreter.render(*body_, context);
}

}  // namespace kvdesk::jinja
