// Text colours that read on the theme's background: the same meaning (error, warning, a
// role's name) in a light shade on the dark theme and a deep one on the light theme.
#pragma once
#include <imgui.h>

#include "ui/view_model.h"

namespace kvdesk::ui {

// Template: what a chat template wrote into a prompt (its control tokens), apart from content.
enum class TextTone : uint8_t { Error, Warning, Good, User, Assistant, System, Template, Tool };

ImVec4 text_colour(TextTone tone, Theme theme);

}  // namespace kvdesk::ui
