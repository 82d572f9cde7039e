// Fragmentation: the internal waste of the paged cache now (reserved-but-unfilled slots in
// the last block of each sequence) against what contiguous max-context preallocation would
// waste for the same sequences, and the waste other block sizes would have had.
#include <imgui.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ui/kv_report.h"
#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

float text_width(const std::string& text) { return ImGui::CalcTextSize(text.c_str()).x; }

// A fixed column as wide as its widest text (header included), so no figure is ever clipped.
void fixed_column(const char* header, const std::vector<std::string>& texts) {
  float w = text_width(header);
  for (const std::string& t : texts) w = std::max(w, text_width(t));
  ImGui::TableSetupColumn(header, ImGuiTableColumnFlags_WidthFixed, w);
}

// A cell's text, recording its width against the cell's.
void cell_text(const std::string& text, const char* where, LayoutReport& report) {
  ImGui::TableNextColumn();
  report.record(where, text_width(text), ImGui::GetContentRegionAvail().x);
  ImGui::TextUnformatted(text.c_str());
}

void cell_bar(double fraction, const std::string& text, const char* where, LayoutReport& report) {
  ImGui::TableNextColumn();
  report.record(where, text_width(text), ImGui::GetContentRegionAvail().x);
  ImGui::ProgressBar(float(std::clamp(fraction, 0.0, 1.0)), ImVec2(-1, 0), text.c_str());
}

struct WasteRow {
  std::string scheme;
  std::string reserved;
  std::string wasted;
  double pct = 0;
};

void draw_comparison(const KvView& kv, LayoutReport& report) {
  const FragmentationFigures f = fragmentation_figures(kv);
  ImGui::TextWrapped("%s tokens stored in %s reserved slots (%d sequences)", format_count(kv.tokens_stored).c_str(),
                     format_count(kv.slots_reserved).c_str(), int(kv.sequences.size()));
  const WasteRow rows[] = {
      {"paged, " + std::to_string(kv.block_size) + "-token blocks", format_count(kv.slots_reserved),
       format_count(f.paged_waste_tokens) + " (" + format_bytes(f.paged_waste_bytes) + ")", f.paged_waste_pct},
      {"contiguous, max context each", format_count(kv.contiguous_reserved_tokens),
       format_count(f.contiguous_waste_tokens) + " (" + format_bytes(f.contiguous_waste_bytes) + ")",
       f.contiguous_waste_pct},
  };
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (ImGui::BeginTable("##waste", 4, flags)) {
    ImGui::TableSetupColumn("scheme", ImGuiTableColumnFlags_WidthStretch);
    fixed_column("reserved", {rows[0].reserved, rows[1].reserved});
    fixed_column("wasted tokens", {rows[0].wasted, rows[1].wasted});
    fixed_column("waste", {format_percent(100.0), format_percent(rows[0].pct), format_percent(rows[1].pct)});
    ImGui::TableHeadersRow();
    for (const WasteRow& row : rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextWrapped("%s", row.scheme.c_str());
      cell_text(row.reserved, "waste table: reserved", report);
      cell_text(row.wasted, "waste table: wasted tokens", report);
      cell_bar(row.pct / 100.0, format_percent(row.pct), "waste table: waste", report);
    }
    ImGui::EndTable();
  }
  if (f.reserve_ratio > 0) {
    ImGui::TextWrapped("Contiguous preallocation (%d tokens per sequence) would reserve %.1fx the memory.", kv.max_context,
                       f.reserve_ratio);
  }
}

void draw_what_if(const KvView& kv, LayoutReport& report) {
  ImGui::TextWrapped("What if the blocks had another size (same sequences)?");
  int64_t worst = 1;
  std::vector<std::string> sizes, tokens, bytes;
  for (const WhatIfView& w : kv.what_if) {
    worst = std::max(worst, w.waste_tokens);
    sizes.push_back(std::to_string(w.block_size) + (w.block_size == kv.block_size ? " (now)" : ""));
    tokens.push_back(format_count(w.waste_tokens));
    bytes.push_back(format_bytes(w.waste_bytes));
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##what_if", 3, flags)) return;
  fixed_column("block size", sizes);
  ImGui::TableSetupColumn("wasted tokens", ImGuiTableColumnFlags_WidthStretch);
  fixed_column("wasted bytes", bytes);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < kv.what_if.size(); ++i) {
    ImGui::TableNextRow();
    cell_text(sizes[i], "what-if table: block size", report);
    cell_bar(double(kv.what_if[i].waste_tokens) / double(worst), tokens[i], "what-if table: wasted tokens", report);
    cell_text(bytes[i], "what-if table: wasted bytes", report);
  }
  ImGui::EndTable();
}

}  // namespace

void draw_fragmentation_panel(ViewModel& vm) {
  if (!vm.kv.valid) {
    ImGui::TextDisabled("%s", no_block_map_note(vm));
    return;
  }
  draw_comparison(vm.kv, vm.ui.layout);
  ImGui::Spacing();
  draw_what_if(vm.kv, vm.ui.layout);
}

}  // namespace kvdesk::ui
