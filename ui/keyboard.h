// Keyboard state in ImGui terms: which io.KeysDown index a chord's key has, and pressing or
// releasing a chord in the ImGui IO (what scripts and headless tests type). ImGui 1.86 indexes
// keys by the platform backend's codes: ImGui::GetKeyIndex gives Enter, Escape and Tab, and the
// GLFW backend's letter keys are their upper-case ASCII codes.
#pragma once
#include "ui/shortcuts.h"

namespace kvdesk::ui {

// -1 for a named key the backend has not mapped (no backend: headless).
int key_index(const std::string& key);
// Holds the chord's modifiers and key down (true) or lets them all go (false).
void set_chord_down(const KeyChord& chord, bool down);

}  // namespace kvdesk::ui
