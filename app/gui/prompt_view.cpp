// Rendering a conversation for the prompt view (see prompt_view.h): the same template source,
// BOS/EOS texts and date the engine renders its requests with.
#include "app/gui/prompt_view.h"

#include "engine/chat/chat_template.h"
#include "engine/error.h"

namespace kvdesk::gui {
namespace {

// Why there is nothing to render, or "" when there is.
std::string nothing_to_render(const ui::ModelView& model, const std::vector<ChatMessage>& messages) {
  if (model.state != ui::ModelState::Loaded) return "Open a model to see the prompt it is given.";
  if (model.backend == "remote") return "The server renders prompts with its own chat template; kvdesk does not see them.";
  if (messages.empty()) return "No messages yet: the prompt appears once the conversation has one.";
  return "";
}

// The segments that hold text, in order.
std::vector<ui::PromptPiece> pieces_of(const std::vector<TextSegment>& segments) {
  std::vector<ui::PromptPiece> pieces;
  pieces.reserve(segments.size());
  for (const TextSegment& s : segments) {
    if (!s.text.empty()) pieces.push_back({s.text, s.parse_special});
  }
  return pieces;
}

}  // namespace

ui::PromptView render_prompt_view(const ui::ModelView& model, const std::vector<ChatMessage>& messages,
                                  const std::tm& date) {
  ui::PromptView view;
  view.note = nothing_to_render(model, messages);
  if (!view.note.empty()) return view;
  const ChatTemplate chat_template = chat_template_from_source(model.chat_template, model.chat_template_source);
  ChatRenderOptions options;
  options.add_generation_prompt = messages.back().role != "assistant";
  try {
    view.pieces = pieces_of(render_chat(chat_template, messages, {model.bos_text, model.eos_text}, date, options));
  } catch (const Error& e) {
    view.error = e.what();
  }
  if (view.error.empty() && view.pieces.empty()) view.note = "The chat template renders this conversation as nothing.";
  return view;
}

std::tm template_date(int64_t started) {
  return started != 0 ? local_time(std::time_t(started)) : local_now();
}

}  // namespace kvdesk::gui
