// Fragmentation: the internal waste of the paged cache now (reserved-but-unfilled slots in
// the last block of each sequence) against what contiguous max-context preallocation would
// waste for the same sequences, and the waste other block sizes would have had.
#include <imgui.h>

#include <algorithm>

#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

void bar_row(const char* scheme, int64_t reserved, int64_t waste_tokens, uint64_t waste_bytes, double pct) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(scheme);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_count(reserved).c_str());
  ImGui::TableNextColumn();
  ImGui::Text("%s (%s)", format_count(waste_tokens).c_str(), format_bytes(waste_bytes).c_str());
  ImGui::TableNextColumn();
  ImGui::ProgressBar(float(std::clamp(pct / 100.0, 0.0, 1.0)), ImVec2(-1, 0), format_percent(pct).c_str());
}

void draw_comparison(const KvView& kv) {
  const FragmentationFigures f = fragmentation_figures(kv);
  ImGui::Text("%s tokens stored in %s reserved slots (%d sequences)", format_count(kv.tokens_stored).c_str(),
              format_count(kv.slots_reserved).c_str(), int(kv.sequences.size()));
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (ImGui::BeginTable("##waste", 4, flags)) {
    ImGui::TableSetupColumn("scheme");
    ImGui::TableSetupColumn("reserved tokens");
    ImGui::TableSetupColumn("wasted tokens");
    ImGui::TableSetupColumn("waste");
    ImGui::TableHeadersRow();
    const std::string paged = "paged, " + std::to_string(kv.block_size) + "-token blocks";
    bar_row(paged.c_str(), kv.slots_reserved, f.paged_waste_tokens, f.paged_waste_bytes, f.paged_waste_pct);
    bar_row("contiguous, max context each", kv.contiguous_reserved_tokens, f.contiguous_waste_tokens,
            f.contiguous_waste_bytes, f.contiguous_waste_pct);
    ImGui::EndTable();
  }
  if (f.reserve_ratio > 0) {
    ImGui::TextWrapped("Contiguous preallocation (%d tokens per sequence) would reserve %.1fx the memory.", kv.max_context,
                f.reserve_ratio);
  }
}

void draw_what_if(const KvView& kv) {
  ImGui::TextUnformatted("What if the blocks had another size (same sequences)?");
  int64_t worst = 1;
  for (const WhatIfView& w : kv.what_if) worst = std::max(worst, w.waste_tokens);
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("##what_if", 3, flags)) return;
  ImGui::TableSetupColumn("block size");
  ImGui::TableSetupColumn("wasted tokens");
  ImGui::TableSetupColumn("wasted bytes");
  ImGui::TableHeadersRow();
  for (const WhatIfView& w : kv.what_if) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text(w.block_size == kv.block_size ? "%d (now)" : "%d", w.block_size);
    ImGui::TableNextColumn();
    ImGui::ProgressBar(float(double(w.waste_tokens) / double(worst)), ImVec2(-1, 0), format_count(w.waste_tokens).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(w.waste_bytes).c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void draw_fragmentation_panel(const ViewModel& vm) {
  if (!vm.kv.valid) {
    ImGui::TextDisabled("No KV cache yet: open a model.");
    return;
  }
  draw_comparison(vm.kv);
  ImGui::Spacing();
  draw_what_if(vm.kv);
}

}  // namespace kvdesk::ui
