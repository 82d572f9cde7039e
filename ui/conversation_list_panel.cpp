// The conversation list: new chat, search, one row per conversation (newest first, a dot
// while it generates), a right-click menu to rename or delete, and their popups. Deleting
// asks for confirmation first.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "ui/emoji_text.h"
#include "ui/emoji_text_field.h"
#include "ui/fonts.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void draw_rename_popup(ViewModel& vm, UiActions& actions) {
  if (vm.ui.rename_conversation != 0 && !ImGui::IsPopupOpen("Rename conversation")) {
    ImGui::OpenPopup("Rename conversation");
  }
  if (!ImGui::BeginPopupModal("Rename conversation", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
  ImGui::SetNextItemWidth(scaled_width(320));
  const bool enter = emoji_input_text("##title", nullptr, vm.ui.rename_text, ImGuiInputTextFlags_EnterReturnsTrue);
  if (ImGui::Button("Rename") || enter) {
    actions.push_back({ActionKind::RenameConversation, vm.ui.rename_conversation, vm.ui.rename_text});
    vm.ui.rename_conversation = 0;
    ImGui::CloseCurrentPopup();
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) {
    vm.ui.rename_conversation = 0;
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void draw_delete_popup(ViewModel& vm, UiActions& actions) {
  if (vm.ui.delete_conversation != 0 && !ImGui::IsPopupOpen("Delete conversation?")) {
    ImGui::OpenPopup("Delete conversation?");
  }
  if (!ImGui::BeginPopupModal("Delete conversation?", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  std::string title;
  for (const ConversationSummary& c : vm.conversations) {
    if (c.id == vm.ui.delete_conversation) title = c.title;
  }
  ImGui::Text("Delete \"%s\" and all its messages?", display_text(title).c_str());
  ImGui::TextDisabled("This cannot be undone.");
  if (ImGui::Button("Delete")) {
    actions.push_back({ActionKind::DeleteConversation, vm.ui.delete_conversation});
    vm.ui.delete_conversation = 0;
    ImGui::CloseCurrentPopup();
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) {
    vm.ui.delete_conversation = 0;
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void draw_row(ViewModel& vm, const ConversationSummary& c, UiActions& actions) {
  ImGui::PushID(static_cast<int>(c.id));
  const float indent = ImGui::GetTextLineHeight();
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  ImGui::SetCursorPosX(ImGui::GetCursorPosX() + indent);
  if (ImGui::Selectable(c.title.empty() ? "(untitled)" : display_text(c.title).c_str(), c.id == vm.chat.conversation_id)) {
    actions.push_back({ActionKind::SelectConversation, c.id});
  }
  if (!c.engine.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("answers from %s", c.engine.c_str());
  if (c.generating) {
    const float r = indent * 0.22f;
    ImGui::GetWindowDrawList()->AddCircleFilled(ImVec2(pos.x + indent * 0.5f, pos.y + indent * 0.55f), r,
                                                IM_COL32(90, 200, 110, 255));
  }
  if (ImGui::BeginPopupContextItem("##row_menu")) {
    if (ImGui::MenuItem("Rename")) {
      vm.ui.rename_conversation = c.id;
      vm.ui.rename_text = c.title;
    }
    if (ImGui::MenuItem("Delete")) vm.ui.delete_conversation = c.id;
    ImGui::EndPopup();
  }
  ImGui::PopID();
}

}  // namespace

void draw_conversation_list_panel(ViewModel& vm, UiActions& actions) {
  if (ImGui::Button("+ New chat", ImVec2(-1, 0))) actions.push_back({ActionKind::NewChat});
  ImGui::SetNextItemWidth(-1);
  if (vm.ui.focus_search) {
    ImGui::SetKeyboardFocusHere();
    vm.ui.focus_search = false;
  }
  if (emoji_input_text("##search", "Search conversations", vm.ui.search)) {
    actions.push_back({ActionKind::Search, 0, vm.ui.search});
  }
  ImGui::Separator();
  ImGui::BeginChild("##conversation_rows");
  if (vm.conversations.empty()) ImGui::TextDisabled(vm.ui.search.empty() ? "No conversations yet." : "No match.");
  for (const ConversationSummary& c : vm.conversations) draw_row(vm, c, actions);
  ImGui::EndChild();
  draw_rename_popup(vm, actions);
  draw_delete_popup(vm, actions);
}

}  // namespace kvdesk::ui
