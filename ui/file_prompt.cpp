// The file prompt: where to export the selected conversation (Markdown or JSON) or which JSON
// export to import, asked in a small modal opened from the File menu.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "ui/fonts.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

const char* prompt_title(const std::string& kind) {
  if (kind == "md") return "Export the conversation as Markdown to";
  if (kind == "json") return "Export the conversation as JSON to";
  return "Import a conversation from the JSON file";
}

}  // namespace

void draw_file_prompt(ViewModel& vm, UiActions& actions) {
  if (!vm.ui.file_prompt.empty() && !ImGui::IsPopupOpen("Conversation file")) ImGui::OpenPopup("Conversation file");
  if (!ImGui::BeginPopupModal("Conversation file", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  ImGui::TextUnformatted(prompt_title(vm.ui.file_prompt));
  ImGui::SetNextItemWidth(scaled_width(420));
  const bool enter = ImGui::InputText("##file_path", &vm.ui.file_path, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::BeginDisabled(vm.ui.file_path.empty());
  const bool ok = ImGui::Button(vm.ui.file_prompt == "import" ? "Import" : "Export", ImVec2(scaled_width(120), 0));
  ImGui::EndDisabled();
  ImGui::SameLine();
  const bool cancel = ImGui::Button("Cancel", ImVec2(scaled_width(120), 0));
  if ((ok || enter) && !vm.ui.file_path.empty()) {
    if (vm.ui.file_prompt == "import") {
      actions.push_back({ActionKind::ImportConversation, 0, vm.ui.file_path});
    } else {
      actions.push_back({ActionKind::ExportConversation, 0, vm.ui.file_prompt, vm.ui.file_path});
    }
  }
  if (ok || enter || cancel) {
    vm.ui.file_prompt.clear();
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

}  // namespace kvdesk::ui
