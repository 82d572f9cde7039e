// Memory budget: one bar of weights | activations | KV used | KV cached | KV free | headroom,
// the host tier's line (KV out of the pool, in host memory),
// and how many conversations of the model's full context fit in the pool per KV type, with
// what grouped-query attention saves (the KV arithmetic, see conversations_that_fit).
#include <imgui.h>

#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void draw_bar(const std::vector<BarSegment>& segments) {
  const float width = ImGui::GetContentRegionAvail().x;
  const float height = ImGui::GetFrameHeight() * 1.4f;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const std::vector<float> widths = segment_widths(segments, width, 4.0f);
  float x = origin.x;
  for (size_t i = 0; i < segments.size(); ++i) {
    const BarSegment& s = segments[i];
    const float w = widths[i];
    if (w <= 0) continue;
    dl->AddRectFilled(ImVec2(x, origin.y), ImVec2(x + w, origin.y + height), s.color);
    if (ImGui::IsMouseHoveringRect(ImVec2(x, origin.y), ImVec2(x + w, origin.y + height))) {
      ImGui::SetTooltip("%s: %s", s.label.c_str(), format_bytes(s.bytes).c_str());
    }
    x += w;
  }
  dl->AddRect(origin, ImVec2(origin.x + width, origin.y + height), IM_COL32(200, 200, 200, 120));
  ImGui::Dummy(ImVec2(width, height));
}

void draw_legend(const std::vector<BarSegment>& segments) {
  const float s = ImGui::GetTextLineHeight() * 0.8f;
  for (size_t i = 0; i < segments.size(); ++i) {
    const BarSegment& seg = segments[i];
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + s, p.y + 2 + s), seg.color);
    ImGui::Dummy(ImVec2(s, s));
    ImGui::SameLine();
    ImGui::Text("%s %s", seg.label.c_str(), seg.bytes > 0 || seg.label != "activations" ? format_bytes(seg.bytes).c_str()
                                                                                         : "(not reported)");
    if (i % 3 != 2) ImGui::SameLine(0, 16);
  }
}

void draw_fit_table(const ViewModel& vm) {
  const ModelView& m = vm.model;
  const std::vector<FitRow> rows =
      conversations_that_fit(vm.kv_types, vm.kv.pool_bytes, m.context_length, m.heads, m.kv_heads, vm.kv.k_type);
  ImGui::TextWrapped("Conversations of %s tokens (the model's context) that fit in the %s pool:",
                     format_count(m.context_length).c_str(), format_bytes(vm.kv.pool_bytes).c_str());
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  if (m.kv_heads > 0 && m.heads > m.kv_heads) {
    ImGui::TextWrapped("GQA: %d query heads share %d K/V heads, so K/V take 1/%d of what full attention would.",
                       m.heads, m.kv_heads, m.heads / m.kv_heads);
  } else {
    ImGui::TextWrapped("No GQA: every query head has its own K/V head (%d).", m.kv_heads);
  }
  if (const std::string windows = sliding_window_text(vm.kv); !windows.empty()) ImGui::TextWrapped("%s", windows.c_str());
  ImGui::PopStyleColor();
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("##fit", 5, flags)) return;
  ImGui::TableSetupColumn("KV type");
  ImGui::TableSetupColumn("bytes/token");
  ImGui::TableSetupColumn("per conversation");
  ImGui::TableSetupColumn("fit");
  ImGui::TableSetupColumn("fit without GQA");
  ImGui::TableHeadersRow();
  for (const FitRow& r : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text(r.current ? "%s (now)" : "%s", r.type.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_count(int64_t(r.bytes_per_token)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(r.bytes_per_conversation).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_count(r.fits).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_count(r.fits_without_gqa).c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void draw_memory_budget_panel(const ViewModel& vm) {
  if (!vm.kv.valid) {
    ImGui::TextDisabled("%s", vm.remote.connected ? "The model runs on a server: its memory is the server's."
                                                  : "No model yet: open one to see its memory budget.");
    return;
  }
  const std::vector<BarSegment> segments = memory_segments(vm.memory, vm.kv);
  ImGui::TextUnformatted("Memory: weights, activations, KV pool, headroom (free memory now)");
  draw_bar(segments);
  draw_legend(segments);
  ImGui::Spacing();
  ImGui::Text("KV pool %s: %d blocks used, %d cached, %d free", format_bytes(vm.kv.pool_bytes).c_str(), vm.kv.blocks_used,
              vm.kv.blocks_cached, vm.kv.blocks_free);
  draw_bar(kv_pool_segments(vm.kv));
  ImGui::TextUnformatted(host_tier_line(vm.kv.host_tier).c_str());
  ImGui::Spacing();
  ImGui::Separator();
  draw_fit_table(vm);
}

}  // namespace kvdesk::ui
