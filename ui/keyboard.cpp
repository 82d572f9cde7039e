// Keyboard: chords against ImGui's IO.
#include "ui/keyboard.h"

#include <imgui.h>

#include <cctype>

namespace kvdesk::ui {

int key_index(const std::string& key) {
  if (key == "enter") return ImGui::GetKeyIndex(ImGuiKey_Enter);
  if (key == "esc") return ImGui::GetKeyIndex(ImGuiKey_Escape);
  if (key == "tab") return ImGui::GetKeyIndex(ImGuiKey_Tab);
  return std::toupper(static_cast<unsigned char>(key.at(0)));
}

void set_chord_down(const KeyChord& chord, bool down) {
  ImGuiIO& io = ImGui::GetIO();
  io.KeyCtrl = down && chord.ctrl;
  io.KeyShift = down && chord.shift;
  io.KeyAlt = down && chord.alt;
  const int index = key_index(chord.key);
  if (index >= 0 && index < int(IM_ARRAYSIZE(io.KeysDown))) io.KeysDown[index] = down;
}

}  // namespace kvdesk::ui
