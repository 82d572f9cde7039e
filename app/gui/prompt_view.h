// The prompt as the model sees it: a conversation's messages rendered with the chat template in
// use (the model's own Jinja source, a family's or plain) into pieces the chat's prompt view
// colours by provenance: what the template wrote (its control tokens) apart from what the
// conversation brought. A template that cannot render the conversation gives its error instead.
#pragma once
#include <ctime>
#include <vector>

#include "engine/engine_types.h"
#include "ui/view_model.h"

namespace kvdesk::gui {

// `messages` rendered with `model`'s template as the engine renders a request, `date` being what
// the template's strftime_now() shows. The generation prompt ends it unless the last message is
// an answer: a finished conversation shows as it stands, one waiting for an answer as it was asked.
ui::PromptView render_prompt_view(const ui::ModelView& model, const std::vector<ChatMessage>& messages,
                                  const std::tm& date);

// The date a conversation's template shows: its start (Unix seconds), or now when unknown (0).
std::tm template_date(int64_t started);

}  // namespace kvdesk::gui
