// The chat: the selected conversation's active branch, streaming as it grows, with branch
// switchers ("< 1/2 >"), Edit on user messages, Copy / Select / Delete (confirmed in place) on
// every message, the text rendered as Markdown (parsed once per message text,
// ui/markdown_cache.h), Regenerate under the last answer and Continue under one that stopped at
// its token limit, and the composer with Send / Stop. A reasoning model's answer shows its
// reasoning folded away above the answer (engine/chat/answer_parts.h); tool calls and tool
// results are blocks of their own (ui/tool_blocks.h). The header's "Prompt as
// the model sees it" shows the conversation rendered with the chat template instead of the
// messages (ui/prompt_view_panel.cpp).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "engine/chat/answer_parts.h"
#include "ui/emoji_text.h"
#include "ui/emoji_text_field.h"
#include "ui/fonts.h"
#include "ui/markdown_view.h"
#include "ui/panel_data.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"
#include "ui/tool_blocks.h"

namespace kvdesk::ui {
namespace {

ImVec4 role_colour(MessageRole role, Theme theme) {
  switch (role) {
    case MessageRole::User: return text_colour(TextTone::User, theme);
    case MessageRole::Assistant: return text_colour(TextTone::Assistant, theme);
    case MessageRole::System:
    case MessageRole::Tool: return text_colour(TextTone::System, theme);
  }
  return text_colour(TextTone::System, theme);
}

bool contains(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

void toggle(std::vector<int64_t>& ids, int64_t id) {
  auto it = std::find(ids.begin(), ids.end(), id);
  if (it == ids.end()) {
    ids.push_back(id);
  } else {
    ids.erase(it);
  }
}

// Read-only multiline text the user can select and copy (Ctrl+C), as tall as its content.
void selectable_text(const char* id, const std::string& real, ImFont* font) {
  std::string text = display_text(real);
  if (font) ImGui::PushFont(font);
  const float width = ImGui::GetContentRegionAvail().x;
  const float height = ImGui::CalcTextSize(text.c_str(), nullptr, false).y + ImGui::GetStyle().FramePadding.y * 2 + 4;
  ImGui::InputTextMultiline(id, &text, ImVec2(width, std::min(height, 600.0f)), ImGuiInputTextFlags_ReadOnly);
  if (font) ImGui::PopFont();
}

// The reasoning, folded (its header says whether the model is still at it), in the dim text
// colour: what the model thought on the way, not its answer.
void draw_reasoning(const AnswerParts& parts) {
  if (!ImGui::TreeNode("##reasoning", "%s", parts.reasoning_open ? "Reasoning..." : "Reasoning")) return;
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  const std::string& reasoning = display_text(parts.reasoning);
  ImGui::PushTextWrapPos(0);   // TextWrapped("%s") would cut the text at ImGui's 3 KB format buffer
  ImGui::TextUnformatted(reasoning.data(), reasoning.data() + reasoning.size());
  ImGui::PopTextWrapPos();
  ImGui::PopStyleColor();
  ImGui::TreePop();
}

void draw_body(ViewModel& vm, MessageView& m, const Fonts& fonts, bool selectable) {
  if (selectable) {
    selectable_text("##select", m.text, nullptr);
    return;
  }
  if (m.text.empty() && m.tool_calls.empty() && m.state == MessageState::Streaming) {
    ImGui::TextDisabled("...");
    return;
  }
  const Theme theme = vm.ui.layout_prefs.theme;
  if (m.role == MessageRole::Tool) {
    draw_tool_result(m, fonts, theme, vm.ui.layout);
    return;
  }
  if (m.role != MessageRole::Assistant) {
    draw_markdown(vm.ui.markdown.document(m.id, m.text), fonts, vm.ui.layout);
    return;
  }
  AnswerParts parts = split_answer(m.text, m.opened_in_reasoning);
  if (parts.reasoning.empty()) parts.reasoning = m.reasoning;
  if (!parts.reasoning.empty() || parts.reasoning_open) draw_reasoning(parts);
  if (!parts.answer.empty()) draw_markdown(vm.ui.markdown.document(m.id, parts.answer), fonts, vm.ui.layout);
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    ImGui::PushID(static_cast<int>(i));
    draw_tool_call(m.tool_calls[i], fonts, theme, vm.ui.layout);
    ImGui::PopID();
  }
}

void draw_branch_switcher(const MessageView& m, UiActions& actions) {
  if (m.sibling_count <= 1) return;
  ImGui::SameLine();
  ImGui::BeginDisabled(m.prev_sibling == 0);
  if (ImGui::ArrowButton("##prev", ImGuiDir_Left)) actions.push_back({ActionKind::SwitchBranch, m.prev_sibling});
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::TextUnformatted(sibling_label(m.sibling_index, m.sibling_count).c_str());
  ImGui::SameLine();
  ImGui::BeginDisabled(m.next_sibling == 0);
  if (ImGui::ArrowButton("##next", ImGuiDir_Right)) actions.push_back({ActionKind::SwitchBranch, m.next_sibling});
  ImGui::EndDisabled();
}

void draw_edit_box(ViewModel& vm, const MessageView& m, UiActions& actions) {
  emoji_input_text_multiline("##edit", vm.ui.edit_text, ImVec2(-1, ImGui::GetTextLineHeight() * 5));
  ImGui::BeginDisabled(vm.chat.generating || vm.ui.edit_text.empty());
  if (ImGui::Button("Send edit")) {
    actions.push_back({ActionKind::EditResend, m.id, vm.ui.edit_text});
    vm.ui.editing_message = 0;
  }
  ImGui::EndDisabled();
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) vm.ui.editing_message = 0;
}

// Deleting takes the replies under a message too (they were written with it in their context),
// so the question says how many of the shown ones go with it.
void draw_delete_confirmation(ViewModel& vm, const MessageView& m, size_t replies_shown, UiActions& actions) {
  if (replies_shown == 0) {
    ImGui::TextUnformatted("Delete this message?");
  } else {
    ImGui::Text("Delete this message and the replies under it (%zu shown below, and any other branches)?", replies_shown);
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("Delete##confirm")) {
    actions.push_back({ActionKind::DeleteMessage, m.id});
    vm.ui.delete_message = 0;
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("Keep")) vm.ui.delete_message = 0;
}

// "Variants: N" beside Regenerate: N answers at once as sibling branches, sharing one prefill
// of the conversation (the engine forks its KV); N is set on the slider beside it.
void draw_variants_button(ViewModel& vm, UiActions& actions) {
  ImGui::SameLine();
  const std::string label = "Variants: " + std::to_string(vm.ui.variants);
  if (ImGui::SmallButton(label.c_str())) actions.push_back({ActionKind::Variants, vm.ui.variants});
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("%d new answers at once, each a branch; they differ when the temperature is above 0", vm.ui.variants);
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(70));
  ImGui::SliderInt("##variants", &vm.ui.variants, 2, 8);
}

void draw_message(ViewModel& vm, MessageView& m, size_t replies_shown, const Fonts& fonts, UiActions& actions) {
  const bool last = replies_shown == 0;
  ImGui::PushID(static_cast<int>(m.id));
  ImGui::AlignTextToFramePadding();
  ImGui::TextColored(role_colour(m.role, vm.ui.layout_prefs.theme), "%s", role_label(m.role));
  if (const char* state = state_label(m.state); *state) {
    ImGui::SameLine();
    ImGui::TextDisabled("(%s)", state);
  }
  draw_branch_switcher(m, actions);
  ImGui::SameLine();
  if (ImGui::SmallButton("Copy")) ImGui::SetClipboardText(display_text(m.text).c_str());   // the clipboard takes display text
  ImGui::SameLine();
  const bool selectable = contains(vm.ui.selectable_messages, m.id);
  if (ImGui::SmallButton(selectable ? "Done" : "Select")) toggle(vm.ui.selectable_messages, m.id);
  if (m.role == MessageRole::User && !vm.chat.generating) {
    ImGui::SameLine();
    if (ImGui::SmallButton("Edit")) {
      vm.ui.editing_message = m.id;
      vm.ui.edit_text = m.text;
    }
  }
  if (!vm.chat.generating) {
    ImGui::SameLine();
    if (ImGui::SmallButton("Delete")) vm.ui.delete_message = m.id;
  }
  if (vm.ui.delete_message == m.id && !vm.chat.generating) draw_delete_confirmation(vm, m, replies_shown, actions);
  if (vm.ui.editing_message == m.id) {
    draw_edit_box(vm, m, actions);
  } else {
    draw_body(vm, m, fonts, selectable);
  }
  if (!m.stats.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", m.stats.c_str());
    ImGui::PopStyleColor();
  }
  if (last && m.role == MessageRole::Assistant && !vm.chat.generating) {
    if (ImGui::SmallButton("Regenerate")) actions.push_back({ActionKind::Regenerate});
    draw_variants_button(vm, actions);
    if (m.can_continue) {
      ImGui::SameLine();
      if (ImGui::SmallButton("Continue")) actions.push_back({ActionKind::ContinueAnswer, m.id});
    }
  }
  ImGui::Separator();
  ImGui::PopID();
}

// The toggle between the messages and the prompt as the model sees it: on the header's line
// when it fits there, else on a line of its own.
void prompt_toggle(ViewModel& vm) {
  const char* label = "Prompt as the model sees it";
  const float needed = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
  ImGui::SameLine();
  if (ImGui::GetContentRegionAvail().x < needed) ImGui::NewLine();
  ImGui::Checkbox(label, &vm.ui.show_prompt);
}

void draw_header(ViewModel& vm) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(vm.chat.title.empty() ? "(untitled)" : display_text(vm.chat.title).c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("Rename")) {
    vm.ui.rename_conversation = vm.chat.conversation_id;
    vm.ui.rename_text = vm.chat.title;
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("Delete")) vm.ui.delete_conversation = vm.chat.conversation_id;
  prompt_toggle(vm);
  ImGui::Separator();
}

// Enter sends, Shift+Enter breaks the line. ImGui 1.86's multiline field offers Enter to send
// with Ctrl+Enter for a new line: on the frame Shift+Enter is pressed, Ctrl is reported held
// while the field runs, so the field takes it as its new-line chord.
bool composer_field(ViewModel& vm, float button_w) {
  ImGuiIO& io = ImGui::GetIO();
  const bool ctrl = io.KeyCtrl;
  const ImGuiKeyModFlags mods = io.KeyMods;
  if (io.KeyShift && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter))) {
    io.KeyCtrl = true;
    io.KeyMods |= ImGuiKeyModFlags_Ctrl;
  }
  if (vm.ui.focus_composer) {
    ImGui::SetKeyboardFocusHere();
    vm.ui.focus_composer = false;
  }
  const ImGuiInputTextFlags flags = ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_CtrlEnterForNewLine;
  const bool enter = emoji_input_text_multiline("##composer", vm.ui.composer,
                                                ImVec2(-button_w - ImGui::GetStyle().ItemSpacing.x, -1), flags);
  io.KeyCtrl = ctrl;
  io.KeyMods = mods;
  return enter;
}

void draw_composer(ViewModel& vm, UiActions& actions) {
  const bool can_send = vm.model.state == ModelState::Loaded && !vm.chat.generating;
  const float button_w = scaled_width(72);
  const bool enter = composer_field(vm, button_w);
  ImGui::SameLine();
  if (vm.chat.generating) {
    if (ImGui::Button("Stop", ImVec2(button_w, -1))) actions.push_back({ActionKind::Stop});
    return;
  }
  ImGui::BeginDisabled(!can_send || vm.ui.composer.empty());
  const bool send = ImGui::Button("Send", ImVec2(button_w, -1));
  ImGui::EndDisabled();
  if ((send || enter) && can_send && !vm.ui.composer.empty()) {
    actions.push_back({ActionKind::Send, 0, vm.ui.composer});
    vm.ui.composer.clear();
    vm.ui.scroll_chat_to_bottom = true;
    vm.ui.focus_composer = true;
  }
}

// The active branch's messages; keeps the bottom in view while an answer streams there.
void draw_messages(ViewModel& vm, const Fonts& fonts, UiActions& actions) {
  if (vm.chat.messages.empty()) {
    ImGui::TextDisabled(vm.model.state == ModelState::Loaded ? "Type a message below to start."
                                                             : "Open a model to start chatting.");
  }
  const bool at_bottom = ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4;
  std::vector<int64_t> shown;
  for (size_t i = 0; i < vm.chat.messages.size(); ++i) {
    draw_message(vm, vm.chat.messages[i], vm.chat.messages.size() - i - 1, fonts, actions);
    shown.push_back(vm.chat.messages[i].id);
  }
  vm.ui.markdown.keep_only(shown);
  if (vm.ui.scroll_chat_to_bottom || (vm.chat.generating && at_bottom)) {
    ImGui::SetScrollHereY(1.0f);
    vm.ui.scroll_chat_to_bottom = false;
  }
}

}  // namespace

void draw_chat_panel(ViewModel& vm, const Fonts& fonts, UiActions& actions) {
  if (vm.chat.conversation_id != 0) {
    draw_header(vm);
    draw_conversation_settings(vm, actions);
  }
  const float composer_h = ImGui::GetTextLineHeight() * 4 + ImGui::GetStyle().FramePadding.y * 2;
  ImGui::BeginChild("##messages", ImVec2(0, -composer_h - ImGui::GetStyle().ItemSpacing.y));
  if (vm.ui.show_prompt && vm.chat.conversation_id != 0) {
    draw_prompt_view(vm, fonts);
  } else {
    draw_messages(vm, fonts, actions);
  }
  ImGui::EndChild();
  draw_composer(vm, actions);
}

}  // namespace kvdesk::ui
