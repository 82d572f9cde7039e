// Emoji text: the app's one emoji table (ui/emoji_table.h) and the conversions the panels use.
// Text handed to ImGui for drawing or editing is display text; text leaving ImGui (an edited
// field, the clipboard) goes back through real_text. Used on the UI thread only.
#pragma once
#include <string>
#include <string_view>

#include "ui/emoji_table.h"

namespace kvdesk::ui {

EmojiTable& emoji_table();

// `real` with its emoji clusters as table points. The reference stays valid until the next
// end_display_frame(): strings met again are not converted again.
const std::string& display_text(const std::string& real);
std::string real_text(std::string_view display);

// Between frames: forgets converted strings when there are many (long conversations scrolled
// through), so that the cache does not grow without bound.
void end_display_frame();

}  // namespace kvdesk::ui
