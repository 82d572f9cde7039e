// A remote server's own KV figures (its /metrics) above the KV panels while the chat runs on it.
// A server that also hands over its block map (kvdesk serve) fills the panels below as a local
// engine does; any other shows these figures only, "unavailable" where it does not expose one.
#include <imgui.h>

#include "ui/kv_report.h"
#include "ui/panels.h"

namespace kvdesk::ui {

void draw_server_stats(const ViewModel& vm) {
  const RemoteView& r = vm.remote;
  if (!r.connected) return;
  ImGui::Text("Server %s (%s)", r.url.c_str(), r.model.c_str());
  if (!r.stats_read) {
    ImGui::TextDisabled("its /metrics have not been read (yet): figures unavailable");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("##server_stats", 2, flags)) return;
  for (const auto& [name, value] : server_stats_rows(r.stats)) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name.c_str());
    ImGui::TableNextColumn();
    if (value == kUnavailable) {
      ImGui::TextDisabled("%s", value.c_str());
    } else {
      ImGui::TextUnformatted(value.c_str());
    }
  }
  ImGui::EndTable();
  if (!vm.kv.valid) ImGui::TextDisabled("This server shows no block map: the KV panels have only these figures.");
  ImGui::Separator();
}

}  // namespace kvdesk::ui
