// The chat's collapsible "Conversation settings": context length, max new tokens, sampling and
// KV retention for the selected conversation. A value the user edits becomes the
// conversation's own (marked "*"); the others follow the app's defaults in Settings, and
// "Use app defaults" lets go of every own value. Each edit is saved when its field is left.
#include <imgui.h>

#include <algorithm>

#include "ui/fonts.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

constexpr float kFieldWidth = 140;

// The field's label with "*" when the conversation sets it itself.
std::string field_label(const ConversationSettingsView& s, SettingField f, const char* label) {
  return std::string(label) + (s.is_own(f) ? " *" : "") + "##" + std::to_string(int(f));
}

// Runs `draw` (one ImGui widget); an edit makes the field the conversation's own.
template <class Draw>
bool edited_field(ConversationSettingsView& s, SettingField f, Draw&& draw) {
  ImGui::SetNextItemWidth(scaled_width(kFieldWidth));
  const bool changed = draw();
  const bool committed = ImGui::IsItemDeactivatedAfterEdit() || (changed && !ImGui::IsItemActive());
  if (committed) s.set_own(f, true);
  return committed;
}

bool draw_length_fields(ConversationSettingsView& s) {
  SamplingView& v = s.values;
  const int32_t model_context = s.model_context;
  bool changed = edited_field(s, SettingField::ContextLength, [&] {
    const std::string label = field_label(s, SettingField::ContextLength, "context length");
    return ImGui::InputInt(label.c_str(), &v.context_length, 64, 512);
  });
  if (changed) v.context_length = std::clamp(v.context_length, kMinConversationContext,
                                             model_context > 0 ? model_context : (1 << 24));
  if (v.context_length == 0 && model_context > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("(the model's: %d)", model_context);
  } else if (model_context > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("(model: %d)", model_context);
  }
  const bool max_changed = edited_field(s, SettingField::MaxTokens, [&] {
    const std::string label = field_label(s, SettingField::MaxTokens, "max new tokens");
    return ImGui::InputInt(label.c_str(), &v.max_tokens, 16, 128);
  });
  if (max_changed) v.max_tokens = std::max(v.max_tokens, 1);
  return changed || max_changed;
}

bool draw_sampling_fields(ConversationSettingsView& s) {
  SamplingView& v = s.values;
  bool changed = false;
  changed |= edited_field(s, SettingField::Temperature, [&] {
    return ImGui::SliderFloat(field_label(s, SettingField::Temperature, "temperature").c_str(), &v.temperature, 0.0f,
                              2.0f, "%.2f");
  });
  changed |= edited_field(s, SettingField::TopP, [&] {
    return ImGui::SliderFloat(field_label(s, SettingField::TopP, "top-p").c_str(), &v.top_p, 0.0f, 1.0f, "%.2f");
  });
  changed |= edited_field(s, SettingField::TopK, [&] {
    return ImGui::SliderInt(field_label(s, SettingField::TopK, "top-k (0: off)").c_str(), &v.top_k, 0, 200);
  });
  changed |= edited_field(s, SettingField::MinP, [&] {
    return ImGui::SliderFloat(field_label(s, SettingField::MinP, "min-p").c_str(), &v.min_p, 0.0f, 1.0f, "%.2f");
  });
  changed |= edited_field(s, SettingField::Seed, [&] {
    return ImGui::InputInt(field_label(s, SettingField::Seed, "seed (0: random)").c_str(), &v.seed);
  });
  v.seed = std::max(v.seed, 0);
  return changed;
}

bool draw_retention_fields(ConversationSettingsView& s) {
  SamplingView& v = s.values;
  bool changed = edited_field(s, SettingField::Retention, [&] {
    return ImGui::Combo(field_label(s, SettingField::Retention, "KV retention").c_str(), &v.retention,
                        kRetentionPolicyNames, IM_ARRAYSIZE(kRetentionPolicyNames));
  });
  if (v.retention != 0) {
    changed |= edited_field(s, SettingField::KvKeep, [&] {
      return ImGui::SliderFloat(field_label(s, SettingField::KvKeep, "KV keep").c_str(), &v.kv_keep, 0.05f, 1.0f,
                                "%.2f");
    });
  }
  return changed;
}

bool any_own(const ConversationSettingsView& s) {
  return std::any_of(std::begin(s.own), std::end(s.own), [](bool own) { return own; });
}

}  // namespace

void draw_conversation_settings(ViewModel& vm, UiActions& actions) {
  ConversationSettingsView& s = vm.chat.settings;
  if (!ImGui::CollapsingHeader("Conversation settings")) return;
  ImGui::PushID("conversation_settings");
  bool changed = draw_length_fields(s);
  changed |= draw_sampling_fields(s);
  changed |= draw_retention_fields(s);
  ImGui::BeginDisabled(!any_own(s));
  if (ImGui::SmallButton("Use app defaults")) {
    std::fill(std::begin(s.own), std::end(s.own), false);
    changed = true;
  }
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::TextDisabled("* this conversation's own; others follow Settings");
  if (!s.note.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, text_colour(TextTone::Warning, vm.ui.layout_prefs.theme));
    ImGui::TextWrapped("%s", s.note.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::PopID();
  ImGui::Separator();
  if (changed) actions.push_back({ActionKind::SetConversationSettings});
}

}  // namespace kvdesk::ui
