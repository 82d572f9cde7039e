// Emoji text fields: each field keeps the display text it edits beside the real text it came
// from; the display text is made again only when the real text changed elsewhere, and written
// back (converted) only when the user changed it.
#include "ui/emoji_text_field.h"

#include <imgui_stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "ui/emoji_text.h"

namespace kvdesk::ui {
namespace {

constexpr size_t kMaxFields = 64;

struct Field {
  std::string real;      // the text the display text was made from (or written back as)
  std::string display;
  bool faithful = true;  // display turns back into real
};

std::unordered_map<ImGuiID, Field>& fields() {
  static std::unordered_map<ImGuiID, Field> by_id;
  return by_id;
}

std::string& typed() {
  static std::string text;
  return text;
}

int insert_typed(ImGuiInputTextCallbackData* data) {
  if (data->EventFlag != ImGuiInputTextFlags_CallbackAlways || typed().empty()) return 0;
  if (data->HasSelection()) {
    const int start = std::min(data->SelectionStart, data->SelectionEnd);
    data->DeleteChars(start, std::abs(data->SelectionEnd - data->SelectionStart));
    data->CursorPos = start;
  }
  data->InsertChars(data->CursorPos, typed().data(), typed().data() + typed().size());
  data->SelectionStart = data->SelectionEnd = data->CursorPos;
  typed().clear();
  return 0;
}

template <typename Draw>
bool edit(const char* label, std::string& real, ImGuiInputTextFlags flags, const Draw& draw) {
  auto [it, inserted] = fields().try_emplace(ImGui::GetID(label));
  Field& f = it->second;
  if (inserted || f.real != real) {
    f.real = real;
    f.display = emoji_table().to_display(real);
    f.faithful = emoji_table().to_real(f.display) == real;
  }
  if (!f.faithful) flags |= ImGuiInputTextFlags_ReadOnly;
  const bool result = draw(f.display, flags | ImGuiInputTextFlags_CallbackAlways);
  if (f.faithful) {
    std::string edited = real_text(f.display);
    if (edited != real) {
      real = std::move(edited);
      f.real = real;
    }
  }
  return result;
}

}  // namespace

bool emoji_input_text(const char* label, const char* hint, std::string& real, ImGuiInputTextFlags flags) {
  return edit(label, real, flags, [&](std::string& display, ImGuiInputTextFlags all) {
    if (hint) return ImGui::InputTextWithHint(label, hint, &display, all, insert_typed);
    return ImGui::InputText(label, &display, all, insert_typed);
  });
}

bool emoji_input_text_multiline(const char* label, std::string& real, const ImVec2& size, ImGuiInputTextFlags flags) {
  return edit(label, real, flags, [&](std::string& display, ImGuiInputTextFlags all) {
    return ImGui::InputTextMultiline(label, &display, size, all, insert_typed);
  });
}

void type_into_active_field(const std::string& display) { typed() += display; }

void end_field_frame() {
  typed().clear();
  if (fields().size() > kMaxFields) fields().clear();
}

}  // namespace kvdesk::ui
