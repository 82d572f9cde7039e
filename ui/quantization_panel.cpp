// Quantization: the KV storage types in use, what each type costs per token and what it costs
// the loaded model (KL divergence from f32 KV and top-1 agreement of its next-token
// distributions, measured by the engine in the background), and the controls that re-create the
// pool with another type, block size or budget (conversations carry on: the engine prefills them
// again).
#include <imgui.h>

#include <string>

#include "ui/fonts.h"
#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void type_combo(const char* label, std::string& value, const std::vector<KvTypeCost>& types) {
  ImGui::SetNextItemWidth(scaled_width(140));
  if (!ImGui::BeginCombo(label, value.c_str())) return;
  for (const KvTypeCost& t : types) {
    if (ImGui::Selectable(t.name.c_str(), t.name == value)) value = t.name;
  }
  ImGui::EndCombo();
}

void draw_types_table(const ViewModel& vm) {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("##kv_types", 5, flags)) return;
  ImGui::TableSetupColumn("type (K and V)");
  ImGui::TableSetupColumn("bytes / token");
  ImGui::TableSetupColumn("vs f32");
  ImGui::TableSetupColumn("KL vs f32 (nats)");
  ImGui::TableSetupColumn("top-1 = f32");
  ImGui::TableHeadersRow();
  uint64_t f32 = 0;
  for (const KvTypeCost& t : vm.kv_types) {
    if (t.name == "f32") f32 = t.bytes_per_token;
  }
  for (const KvTypeCost& t : vm.kv_types) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool current = t.name == vm.kv.k_type && t.name == vm.kv.v_type;
    ImGui::Text(current ? "%s (now)" : "%s", t.name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_count(int64_t(t.bytes_per_token)).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.0f%%", f32 > 0 ? 100.0 * double(t.bytes_per_token) / double(f32) : 0.0);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(kv_kl_text(t.quality).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(kv_top1_text(t.quality).c_str());
    if (t.quality.state == KvQualityState::Failed && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", t.quality.failure.c_str());
  }
  ImGui::EndTable();
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("KL and top-1: this model's next-token distributions with the type for K and V against f32 KV's, "
                     "over a short built-in text; measured once per model in the background and kept.");
  ImGui::PopStyleColor();
}

void draw_controls(ViewModel& vm, UiActions& actions) {
  KvSettingsEdit& e = vm.ui.kv_edit;
  ImGui::TextUnformatted("Change the KV pool");
  type_combo("K type", e.k_type, vm.kv_types);
  ImGui::SameLine();
  type_combo("V type", e.v_type, vm.kv_types);
  ImGui::SetNextItemWidth(scaled_width(140));
  if (ImGui::BeginCombo("block size", std::to_string(e.block_size).c_str())) {
    for (int32_t b : vm.ui.block_sizes) {
      if (ImGui::Selectable(std::to_string(b).c_str(), b == e.block_size)) e.block_size = b;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(120));
  ImGui::InputInt("budget MiB (0: auto)", &e.budget_mib, 16, 256);
  if (e.budget_mib < 0) e.budget_mib = 0;
  ImGui::Checkbox("prefix caching", &e.prefix_caching);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(120));
  ImGui::InputInt("host tier MiB (next load)", &e.host_tier_mib, 64, 512);
  if (e.host_tier_mib < 0) e.host_tier_mib = 0;
  ImGui::SameLine();
  ImGui::BeginDisabled(vm.model.state != ModelState::Loaded || vm.remote.connected);
  if (ImGui::Button("Apply")) actions.push_back({ActionKind::ReconfigureKv});
  ImGui::EndDisabled();
  if (vm.remote.connected) {
    ImGui::TextDisabled("The chat runs on a server, whose KV pool is its own: these apply to the in-process engine.");
    return;
  }
  ImGui::TextDisabled("Running conversations carry on: their KV is prefilled again into the new pool.");
}

}  // namespace

void draw_quantization_panel(ViewModel& vm, UiActions& actions) {
  const KvView& kv = vm.kv;
  if (kv.valid) {
    ImGui::Text("K: %s   V: %s   block: %d tokens", kv.k_type.c_str(), kv.v_type.c_str(), kv.block_size);
    ImGui::Text("%s bytes/token, %s per block, pool %s", format_count(int64_t(kv.bytes_per_token)).c_str(),
                format_bytes(kv.bytes_per_block).c_str(), format_bytes(kv.pool_bytes).c_str());
    if (kv.recent_rows > 0) {
      ImGui::Text("Newest %d rows of each conversation also kept in f32 and read exact: %s now", kv.recent_rows,
                  format_bytes(kv.recent_row_bytes).c_str());
    }
    const std::string quality = kv_quality_line(vm.kv_types, kv.k_type);
    if (!quality.empty()) ImGui::TextWrapped("K type %s", quality.c_str());
  } else {
    ImGui::TextDisabled("No KV cache yet: open a model.");
  }
  ImGui::Spacing();
  draw_types_table(vm);
  ImGui::Spacing();
  ImGui::Separator();
  draw_controls(vm, actions);
}

}  // namespace kvdesk::ui
