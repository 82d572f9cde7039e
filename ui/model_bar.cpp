// The model bar: a path field, Open, the Library (or back to the chat), the recent models, a remote server instead (ui/remote_picker.cpp),
// where the app serves over HTTP, and what the engine says about the model (loading: a progress
// bar with Cancel; loaded with its shape; or why it failed).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <cstdio>
#include <string_view>

#include "ui/fonts.h"
#include "ui/kv_report.h"
#include "ui/panel_data.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

// What the engine says about the model, shortened with "..." to the width left (whole on hover).
void draw_model_state(const ModelView& m, Theme theme, LayoutReport& report, UiActions& actions) {
  switch (m.state) {
    case ModelState::None:
      ImGui::TextDisabled("no model open");
      break;
    case ModelState::Loading: {
      char label[64];
      std::snprintf(label, sizeof label, "loading %.0f%% (%.1f s)", m.load_progress * 100.0, m.loading_seconds);
      ImGui::ProgressBar(float(m.load_progress), ImVec2(ImGui::CalcTextSize(label).x + 24, 0), label);
      ImGui::SameLine();
      if (ImGui::SmallButton("Cancel")) actions.push_back({ActionKind::CancelModelLoad});
      break;
    }
    case ModelState::Loaded: {
      char buf[512];
      if (m.backend == "remote") {   // a server tells its model's name and context, not its shape
        std::snprintf(buf, sizeof buf, "%s on the server %s, ctx %s", m.name.c_str(), m.path.c_str(),
                      m.context_length > 0 ? std::to_string(m.context_length).c_str() : "not told");
      } else {
        std::snprintf(buf, sizeof buf, "%s (%s)  %s params, %d layers, %d/%d heads (q/kv), ctx %d, %s", m.name.c_str(),
                      m.architecture.c_str(), format_count(m.parameters).c_str(), m.layers, m.heads, m.kv_heads,
                      m.context_length, format_bytes(m.weight_bytes).c_str());
      }
      const float width = ImGui::GetContentRegionAvail().x;
      const std::string shown = elide_to_width(buf, width, [](std::string_view t) {
        return ImGui::CalcTextSize(t.data(), t.data() + t.size()).x;
      });
      report.record("model bar", ImGui::CalcTextSize(shown.c_str()).x, width);
      ImGui::TextUnformatted(shown.c_str());
      if (shown != buf && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", buf);
      break;
    }
    case ModelState::Failed:
      ImGui::TextColored(text_colour(TextTone::Error, theme), "failed: %s", m.error.c_str());
      break;
  }
}

}  // namespace

void draw_model_bar(ViewModel& vm, UiActions& actions) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Model");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(340));
  const bool enter = ImGui::InputTextWithHint("##model_path", "path to a .gguf model", &vm.ui.model_path,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  ImGui::BeginDisabled(vm.ui.model_path.empty() || vm.model.state == ModelState::Loading);
  if (ImGui::Button("Open") || enter) actions.push_back({ActionKind::OpenModel, 0, vm.ui.model_path});
  ImGui::EndDisabled();
  ImGui::SameLine();
  if (ImGui::Button(vm.ui.show_library ? "Chat" : "Library")) vm.ui.show_library = !vm.ui.show_library;
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(90));
  if (ImGui::BeginCombo("##recent", "Recent")) {
    if (vm.model.recent.empty()) ImGui::TextDisabled("no recent models");
    for (const std::string& path : vm.model.recent) {
      if (ImGui::Selectable(path.c_str())) {
        vm.ui.model_path = path;
        actions.push_back({ActionKind::OpenModel, 0, path});
      }
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  draw_remote_picker(vm, actions);
  ImGui::SameLine();
  if (vm.serve.on) {
    ImGui::TextDisabled("HTTP %s (%d running, %d waiting)", vm.serve.url.c_str(), vm.serve.running, vm.serve.waiting);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", serving_line(vm.serve).c_str());
    ImGui::SameLine();
  }
  draw_model_state(vm.model, vm.ui.layout_prefs.theme, vm.ui.layout, actions);
}

}  // namespace kvdesk::ui
