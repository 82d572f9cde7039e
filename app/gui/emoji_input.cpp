// Emoji input: the typed characters of a frame gathered as UTF-8, the clipboard wrapped around
// the functions ImGui's GLFW backend installed.
#include "app/gui/emoji_input.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <string>

#include "engine/tokenizer/utf8_decode.h"
#include "ui/emoji_text.h"
#include "ui/emoji_text_field.h"

namespace kvdesk::gui {
namespace {

struct Clipboard {
  const char* (*get)(void*) = nullptr;
  void (*set)(void*, const char*) = nullptr;
  void* user_data = nullptr;
  std::string display;   // the last text read, as display text (ImGui keeps the pointer a while)
};

Clipboard& clipboard() {
  static Clipboard c;
  return c;
}

std::string& typed() {
  static std::string text;
  return text;
}

const char* get_clipboard(void*) {
  Clipboard& c = clipboard();
  const char* real = c.get ? c.get(c.user_data) : nullptr;
  if (!real) return nullptr;
  c.display = ui::emoji_table().to_display(real);
  return c.display.c_str();
}

void set_clipboard(void*, const char* display) {
  Clipboard& c = clipboard();
  if (c.set && display) c.set(c.user_data, ui::real_text(display).c_str());
}

void on_char(GLFWwindow*, unsigned int code_point) { add_typed_character(code_point); }

}  // namespace

void install_emoji_input(GLFWwindow* window) {
  glfwSetCharCallback(window, on_char);
  ImGuiIO& io = ImGui::GetIO();
  Clipboard& c = clipboard();
  c.get = io.GetClipboardTextFn;
  c.set = io.SetClipboardTextFn;
  c.user_data = io.ClipboardUserData;
  io.GetClipboardTextFn = get_clipboard;
  io.SetClipboardTextFn = set_clipboard;
}

void add_typed_character(unsigned int code_point) {
  if (code_point == 0 || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) return;
  typed() += encode_utf8(char32_t(code_point));
}

void hand_typed_characters_to_imgui() {
  std::string& text = typed();
  if (text.empty()) return;
  const std::string display = ui::emoji_table().to_display(text);
  if (display == text) {
    ImGui::GetIO().AddInputCharactersUTF8(text.c_str());
  } else {
    ui::type_into_active_field(display);
  }
  text.clear();
}

}  // namespace kvdesk::gui
