// Text colours per theme (see theme_colours.h).
#include "ui/theme_colours.h"

namespace kvdesk::ui {

ImVec4 text_colour(TextTone tone, Theme theme) {
  const bool light = theme == Theme::Light;
  switch (tone) {
    case TextTone::Error: return light ? ImVec4(0.75f, 0.1f, 0.1f, 1) : ImVec4(1.0f, 0.45f, 0.4f, 1);
    case TextTone::Warning: return light ? ImVec4(0.6f, 0.4f, 0.0f, 1) : ImVec4(1.0f, 0.8f, 0.3f, 1);
    case TextTone::Good: return light ? ImVec4(0.1f, 0.5f, 0.1f, 1) : ImVec4(0.6f, 0.85f, 0.6f, 1);
    case TextTone::User: return light ? ImVec4(0.1f, 0.3f, 0.7f, 1) : ImVec4(0.55f, 0.75f, 1.0f, 1);
    case TextTone::Assistant: return light ? ImVec4(0.1f, 0.5f, 0.1f, 1) : ImVec4(0.6f, 0.9f, 0.6f, 1);
    case TextTone::System: return light ? ImVec4(0.5f, 0.45f, 0.0f, 1) : ImVec4(0.8f, 0.8f, 0.5f, 1);
    case TextTone::Template: return light ? ImVec4(0.6f, 0.1f, 0.55f, 1) : ImVec4(0.95f, 0.55f, 0.9f, 1);
    case TextTone::Tool: return light ? ImVec4(0.0f, 0.45f, 0.5f, 1) : ImVec4(0.45f, 0.85f, 0.85f, 1);
  }
  return light ? ImVec4(0, 0, 0, 1) : ImVec4(1, 1, 1, 1);
}

}  // namespace kvdesk::ui
