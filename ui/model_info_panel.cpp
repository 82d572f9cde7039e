// The Model tab: what the loaded model is (ui/model_info.h), as three two-column tables.
#include <imgui.h>

#include "ui/model_info.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void draw_rows(const char* id, const std::vector<ModelInfoRow>& rows) {
  if (!ImGui::BeginTable(id, 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV)) return;
  ImGui::TableSetupColumn("label", ImGuiTableColumnFlags_WidthFixed);
  ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
  for (const ModelInfoRow& r : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(r.label.c_str());
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", r.value.c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void draw_model_info_panel(const ViewModel& vm) {
  if (vm.model.state != ModelState::Loaded) {
    ImGui::TextDisabled("Open a model to see what it is.");
    return;
  }
  draw_rows("##model_info", model_info_rows(vm.model));
  ImGui::Spacing();
  ImGui::TextUnformatted("Weight types");
  draw_rows("##weight_types", weight_type_rows(vm.model));
  ImGui::Spacing();
  ImGui::TextUnformatted("KV bytes per token (K + V, all layers)");
  draw_rows("##kv_costs", kv_cost_rows(vm.kv_types));
}

}  // namespace kvdesk::ui
