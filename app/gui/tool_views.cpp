// Filling a message view's tool blocks (see tool_views.h).
#include "app/gui/tool_views.h"

#include <nlohmann/json.hpp>

#include "app/store/bounded_json.h"
#include "app/store/message_fields.h"

namespace kvdesk {
namespace {

using json = nlohmann::ordered_json;   // keys in the order the model or the tool wrote them

// `text` indented when it is a JSON object or array (invalid UTF-8 inside shown as U+FFFD), else
// empty: also for JSON nested too deep to walk safely (store::parse_bounded_json), shown as written.
std::string indented_json(const std::string& text) {
  bool too_deep = false;
  const json j = store::parse_bounded_json<json>(text, too_deep);
  if (j.is_discarded() || !j.is_structured()) return {};
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

// An answer that shows code (a fence) may quote a call's markup rather than make a call: its
// markup is left as text.
bool may_hold_calls(const std::string& answer) { return answer.find("```") == std::string::npos; }

ui::ToolCallView call_view(std::string id, std::string name, const std::string& arguments) {
  std::string shown = indented_json(arguments);
  return ui::ToolCallView{std::move(id), std::move(name), shown.empty() ? arguments : std::move(shown)};
}

}  // namespace

void add_tool_views(const store::Message& message, ToolCallFormat answer_format, ui::MessageView& view) {
  const store::MessageFields fields = store::parse_message_fields(message.fields_json);
  if (message.role == store::Role::Assistant) view.reasoning = fields.reasoning;
  for (const store::ToolCallField& call : fields.tool_calls) {
    view.tool_calls.push_back(call_view(call.id, call.name, call.arguments));
  }
  if (message.role == store::Role::Tool) {
    view.tool_name = fields.name;
    view.tool_call_id = fields.tool_call_id;
    if (std::string shown = indented_json(message.content); !shown.empty()) {
      view.text = std::move(shown);
      view.text_is_json = true;
    }
    return;
  }
  const bool finished_answer = message.role == store::Role::Assistant && message.status != store::MessageStatus::Streaming;
  if (!finished_answer || !view.tool_calls.empty() || answer_format == ToolCallFormat::None ||
      !may_hold_calls(message.content)) {
    return;
  }
  ParsedAnswer parsed = parse_tool_calls(answer_format, message.content);
  if (parsed.tool_calls.empty()) return;
  view.text = std::move(parsed.content);
  for (ToolCall& call : parsed.tool_calls) {
    view.tool_calls.push_back(call_view(std::move(call.id), std::move(call.name), call.arguments));
  }
}

}  // namespace kvdesk
