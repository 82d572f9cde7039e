// Emoji input: the characters the window receives and the clipboard ImGui reads and writes go
// through the emoji table (ui/emoji_table.h), since ImGui's 16-bit characters turn anything above
// U+FFFF into U+FFFD. Characters typed between two frames are handed over together before the
// next: a batch with an emoji in it (typed sequences such as a skin tone or ZWJ family arrive as
// several characters) becomes display text for the active emoji field (ui/emoji_text_field.h),
// anything else goes to ImGui as typed characters. Pasted text becomes display text; copied
// display text becomes the original text again.
#pragma once

struct GLFWwindow;

namespace kvdesk::gui {

// After ImGui_ImplGlfw_InitForOpenGL: takes over the window's character callback and ImGui's
// clipboard functions (calling GLFW's underneath).
void install_emoji_input(GLFWwindow* window);

// One character as GLFW reports it (its callback; scripts type through here too).
void add_typed_character(unsigned int code_point);

// Before ImGui::NewFrame: hands over what was typed since the last frame.
void hand_typed_characters_to_imgui();

}  // namespace kvdesk::gui
