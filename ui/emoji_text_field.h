// Emoji text fields: ImGui text fields over real text (with emoji) that edit its display text
// (ui/emoji_text.h), so emoji show as pictures while the text is edited, and that take emoji the
// user types: ImGui drops typed Private Use characters, so the window's input code hands typed
// emoji here (as display text) and the active field inserts them at its cursor.
#pragma once
#include <imgui.h>

#include <string>

namespace kvdesk::ui {

// As ImGui::InputTextWithHint (hint may be nullptr) and InputTextMultiline on `real`; returns
// what they return. Text that cannot be shown faithfully (the emoji table is full) is shown
// read-only rather than risk changing it.
bool emoji_input_text(const char* label, const char* hint, std::string& real, ImGuiInputTextFlags flags = 0);
bool emoji_input_text_multiline(const char* label, std::string& real, const ImVec2& size, ImGuiInputTextFlags flags = 0);

// Display text typed in this frame, for the active emoji field to insert (replacing its selection).
void type_into_active_field(const std::string& display);

// Between frames: typed text that no field took is dropped; fields not drawn lately are forgotten.
void end_field_frame();

}  // namespace kvdesk::ui
