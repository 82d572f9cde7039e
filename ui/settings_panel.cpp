// Chat settings: the selected conversation's system prompt, reusable presets, the chat
// template (with its Jinja source, and why it cannot render when it does not parse), the sampling
// settings new answers use, the theme and the font size. Edits become actions when the field is left.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ui/emoji_text_field.h"
#include "ui/font_size.h"
#include "ui/fonts.h"
#include "ui/panel_data.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

void draw_system_prompt(ViewModel& vm, UiActions& actions) {
  ImGui::TextUnformatted("System prompt");
  ImGui::BeginDisabled(vm.chat.conversation_id == 0);
  emoji_input_text_multiline("##system_prompt", vm.chat.system_prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 5));
  if (ImGui::IsItemDeactivatedAfterEdit()) actions.push_back({ActionKind::SetSystemPrompt, 0, vm.chat.system_prompt});
  ImGui::EndDisabled();
  if (vm.chat.conversation_id == 0) ImGui::TextDisabled("Select or start a conversation to set its system prompt.");
}

void draw_presets(ViewModel& vm, UiActions& actions) {
  ImGui::TextUnformatted("Presets");
  if (vm.presets.empty()) ImGui::TextDisabled("No presets yet: write a system prompt and save it.");
  for (const PresetView& p : vm.presets) {
    ImGui::PushID(static_cast<int>(p.id));
    ImGui::BeginDisabled(vm.chat.conversation_id == 0);
    if (ImGui::SmallButton("Use")) actions.push_back({ActionKind::ApplyPreset, p.id});
    ImGui::EndDisabled();
    ImGui::SameLine();
    if (ImGui::SmallButton("x")) actions.push_back({ActionKind::DeletePreset, p.id});
    ImGui::SameLine();
    ImGui::TextUnformatted(p.name.c_str());
    if (ImGui::IsItemHovered() && !p.system_prompt.empty()) ImGui::SetTooltip("%s", p.system_prompt.c_str());
    ImGui::PopID();
  }
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::InputTextWithHint("##preset_name", "preset name", &vm.ui.preset_name);
  ImGui::SameLine();
  ImGui::BeginDisabled(vm.ui.preset_name.empty() || vm.chat.system_prompt.empty());
  if (ImGui::Button("Save system prompt as preset")) {
    actions.push_back({ActionKind::SavePreset, 0, vm.ui.preset_name, vm.chat.system_prompt});
    vm.ui.preset_name.clear();
  }
  ImGui::EndDisabled();
}

// A template that does not parse renders no prompt: the engine's message (naming the line) in the
// error colour right under the list, saying to choose another from it.
void draw_chat_template_notice(const ViewModel& vm) {
  const std::string notice = chat_template_notice(vm.model, vm.ui.chat_template);
  if (notice.empty()) return;
  ImGui::PushStyleColor(ImGuiCol_Text, text_colour(TextTone::Error, vm.ui.layout_prefs.theme));
  ImGui::TextWrapped("%s", notice.c_str());
  ImGui::PopStyleColor();
}

// The collapsible "Template": the Jinja source prompts are rendered with (read-only, scrolling)
// and what its bos_token and eos_token are; open from the start when the source does not parse,
// so the line the notice names is in sight.
void draw_template_source(ViewModel& vm) {
  const ImGuiTreeNodeFlags flags = vm.model.chat_template_warning.empty() ? 0 : ImGuiTreeNodeFlags_DefaultOpen;
  if (!ImGui::CollapsingHeader("Template", flags)) return;
  if (vm.model.state != ModelState::Loaded) {
    ImGui::TextDisabled("Open a model to see its chat template.");
    return;
  }
  if (vm.model.chat_template_source.empty()) {
    ImGui::TextDisabled("The server renders prompts with its own chat template.");
    return;
  }
  ImGui::TextDisabled("%s", special_texts_line(vm.model).c_str());
  ImGui::InputTextMultiline("##template_source", &vm.model.chat_template_source,
                            ImVec2(-1, ImGui::GetTextLineHeight() * 14), ImGuiInputTextFlags_ReadOnly);
}

// The chat template prompts are rendered with: the model's own Jinja template or a family chosen
// by name; beside it, why the template in use cannot render, and the template's source.
void draw_chat_template(ViewModel& vm, UiActions& actions) {
  ImGui::TextUnformatted("Chat template");
  const std::string own = own_template_label(vm.model, vm.ui.chat_template);
  ImGui::SetNextItemWidth(scaled_width(200));
  if (ImGui::BeginCombo("##chat_template", vm.ui.chat_template.empty() ? own.c_str() : vm.ui.chat_template.c_str())) {
    if (ImGui::Selectable(own.c_str(), vm.ui.chat_template.empty())) actions.push_back({ActionKind::SetChatTemplate, 0, ""});
    for (const std::string& name : vm.ui.chat_templates) {
      if (ImGui::Selectable(name.c_str(), vm.ui.chat_template == name)) actions.push_back({ActionKind::SetChatTemplate, 0, name});
    }
    ImGui::EndCombo();
  }
  draw_chat_template_notice(vm);
  draw_template_source(vm);
}

// The app's defaults: what a conversation uses where it sets nothing itself.
void draw_sampling(ViewModel& vm, UiActions& actions) {
  ImGui::TextUnformatted("Defaults for conversations (a conversation's own settings win)");
  SamplingView& s = vm.sampling;
  bool changed = false;
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::InputInt("context length (0: the model's)", &s.context_length, 64, 512);
  if (ImGui::IsItemDeactivatedAfterEdit()) {
    s.context_length = s.context_length <= 0 ? 0 : std::max(s.context_length, kMinConversationContext);
    changed = true;
  }
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::SliderFloat("temperature (0: greedy)", &s.temperature, 0.0f, 2.0f, "%.2f");
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::SliderInt("top-k (0: off)", &s.top_k, 0, 200);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::SliderFloat("top-p", &s.top_p, 0.0f, 1.0f, "%.2f");
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::SliderFloat("min-p", &s.min_p, 0.0f, 1.0f, "%.2f");
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::SliderFloat("repeat penalty", &s.repeat_penalty, 1.0f, 2.0f, "%.2f");
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::InputInt("max tokens", &s.max_tokens, 16, 128);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::InputInt("seed (0: random)", &s.seed);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  changed |= ImGui::Checkbox("when the context is full, keep its start and slide", &s.slide_context);
  ImGui::SetNextItemWidth(scaled_width(200));
  changed |= ImGui::Combo("KV retention", &s.retention, kRetentionPolicyNames, IM_ARRAYSIZE(kRetentionPolicyNames));
  if (s.retention != 0) {
    ImGui::SetNextItemWidth(scaled_width(200));
    ImGui::SliderFloat("KV keep (share of tokens)", &s.kv_keep, 0.05f, 1.0f, "%.2f");
    changed |= ImGui::IsItemDeactivatedAfterEdit();
  }
  if (changed) actions.push_back({ActionKind::SetSampling});
}

void draw_theme(ViewModel& vm, UiActions& actions) {
  ImGui::TextUnformatted("Theme");
  for (Theme theme : {Theme::Dark, Theme::Light}) {
    ImGui::SameLine();
    if (ImGui::RadioButton(theme_name(theme), vm.ui.layout_prefs.theme == theme)) {
      actions.push_back({ActionKind::SetTheme, 0, theme_name(theme)});
    }
  }
}

// The size at a content scale of 1; the window multiplies it by the monitor's. Applied when the
// slider is let go: every change rebuilds the font atlas.
void draw_font_size(ViewModel& vm, UiActions& actions) {
  float& edit = vm.ui.font_size_edit;
  if (edit == 0) edit = vm.ui.layout_prefs.font_size;
  ImGui::SetNextItemWidth(scaled_width(200));
  ImGui::SliderFloat("Font size (px at 100%)", &edit, kMinFontSize, kMaxFontSize, "%.0f");
  if (ImGui::IsItemDeactivatedAfterEdit()) actions.push_back({ActionKind::SetFontSize, 0, std::to_string(int(std::round(edit)))});
  if (!ImGui::IsItemActive()) edit = 0;
}

}  // namespace

void draw_settings_panel(ViewModel& vm, UiActions& actions) {
  draw_system_prompt(vm, actions);
  ImGui::Spacing();
  ImGui::Separator();
  draw_presets(vm, actions);
  ImGui::Spacing();
  ImGui::Separator();
  draw_chat_template(vm, actions);
  ImGui::Spacing();
  ImGui::Separator();
  draw_sampling(vm, actions);
  ImGui::Spacing();
  ImGui::Separator();
  draw_serve_settings(vm, actions);
  ImGui::Spacing();
  ImGui::Separator();
  draw_theme(vm, actions);
  draw_font_size(vm, actions);
}

}  // namespace kvdesk::ui
