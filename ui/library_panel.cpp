// The Library view: the GGUF models on this machine (LM Studio's, Ollama's, Hugging Face's,
// llama.cpp's and the user's folders) in a sortable table with what each is and what fits.
// Double-click opens a model; its context menu opens it, shows it in the file manager or copies
// its path. The app shows it in the chat's place at the start when no model is open.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <iterator>

#include "ui/emoji_text.h"
#include "ui/library_rows.h"
#include "ui/panel_data.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

struct ColumnSpec {
  const char* title;
  LibraryColumn column;
  ImGuiTableColumnFlags flags;
};

constexpr ColumnSpec kColumns[] = {
    {"Name", LibraryColumn::Name, ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_WidthStretch},
    {"Source", LibraryColumn::Source, ImGuiTableColumnFlags_WidthFixed},
    {"Size", LibraryColumn::Size, ImGuiTableColumnFlags_WidthFixed},
    {"Arch", LibraryColumn::Arch, ImGuiTableColumnFlags_WidthFixed},
    {"Params", LibraryColumn::Params, ImGuiTableColumnFlags_WidthFixed},
    {"Type", LibraryColumn::WeightType, ImGuiTableColumnFlags_WidthFixed},
    {"Context", LibraryColumn::Context, ImGuiTableColumnFlags_WidthFixed},
    {"Template", LibraryColumn::Template, ImGuiTableColumnFlags_WidthFixed},
    {"Fits (f16 KV)", LibraryColumn::Fits, ImGuiTableColumnFlags_WidthFixed},
};

// The size filter's choices: 0 is any size.
constexpr int32_t kSizeChoicesGib[] = {0, 2, 4, 8, 16, 32, 64};

std::string fits_text(const LibraryEntryView& e) {
  if (e.broken) return "broken";
  if (e.fits.empty()) return "cannot run";
  for (const LibraryFitView& f : e.fits) {
    if (f.kv_type != "f16") continue;
    if (f.max_context == 0) return "too big";
    return format_count(f.max_context) + " tok, " + format_count(f.conversations) + " x 4K";
  }
  return "";
}

// Every KV type's room, or why the model cannot run: the Fits cell's tooltip.
void fits_tooltip(const LibraryEntryView& e, uint64_t memory_bytes) {
  ImGui::BeginTooltip();
  ImGui::TextUnformatted(e.path.c_str());
  if (!e.error.empty()) {
    ImGui::TextWrapped("%s", e.error.c_str());
  } else {
    ImGui::Text("In %s of memory after the weights:", format_bytes(memory_bytes).c_str());
    for (const LibraryFitView& f : e.fits) {
      ImGui::Text("  %-9s %11s tokens, %s conversations of 4K", f.kv_type.c_str(), format_count(f.max_context).c_str(),
                  format_count(f.conversations).c_str());
    }
  }
  if (e.projectors > 0) ImGui::Text("with %d vision projector file(s)", e.projectors);
  ImGui::EndTooltip();
}

void draw_filters(ViewModel& vm, UiActions& actions) {
  UiState& ui = vm.ui;
  ImGui::SetNextItemWidth(scaled_width(220));
  ImGui::InputTextWithHint("##library_filter", "filter by name or path", &ui.library_filter);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(120));
  if (ImGui::BeginCombo("##library_arch", ui.library_arch.empty() ? "any arch" : ui.library_arch.c_str())) {
    if (ImGui::Selectable("any arch", ui.library_arch.empty())) ui.library_arch.clear();
    for (const std::string& arch : library_architectures(vm.library.entries)) {
      if (ImGui::Selectable(arch.c_str(), ui.library_arch == arch)) ui.library_arch = arch;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(110));
  const std::string size_label = ui.library_max_gib == 0 ? "any size" : "up to " + std::to_string(ui.library_max_gib) + " GiB";
  if (ImGui::BeginCombo("##library_size", size_label.c_str())) {
    for (int32_t gib : kSizeChoicesGib) {
      const std::string label = gib == 0 ? "any size" : "up to " + std::to_string(gib) + " GiB";
      if (ImGui::Selectable(label.c_str(), ui.library_max_gib == gib)) ui.library_max_gib = gib;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  if (ImGui::Button("Open file...")) {
    ui.browser_purpose = BrowsePurpose::OpenModel;
    actions.push_back({ActionKind::BrowseFolder, 0, vm.browser.folder});
  }
  ImGui::SameLine();
  if (ImGui::Button("Add folder...")) {
    ui.browser_purpose = BrowsePurpose::AddLibraryFolder;
    actions.push_back({ActionKind::BrowseFolder, 0, vm.browser.folder});
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(vm.library.scanning);
  if (ImGui::Button("Rescan")) actions.push_back({ActionKind::RescanLibrary});
  ImGui::EndDisabled();
}

void read_sort(LibraryQuery& query) {
  ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
  if (!specs || specs->SpecsCount == 0) return;
  const ImGuiTableColumnSortSpecs& first = specs->Specs[0];
  query.sort = kColumns[first.ColumnIndex].column;
  query.ascending = first.SortDirection != ImGuiSortDirection_Descending;
}

void draw_row(const ViewModel& vm, const LibraryEntryView& e, int32_t index, UiActions& actions) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::PushID(index);
  if (e.broken || !e.error.empty()) ImGui::PushStyleColor(ImGuiCol_Text, text_colour(TextTone::Error, vm.ui.layout_prefs.theme));
  const bool clicked = ImGui::Selectable(e.name.c_str(), false,
                                         ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick);
  if (e.broken || !e.error.empty()) ImGui::PopStyleColor();
  if (clicked && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && !e.broken) {
    actions.push_back({ActionKind::OpenModel, 0, e.path});
  }
  if (ImGui::IsItemHovered()) fits_tooltip(e, vm.library.memory_bytes);
  if (ImGui::BeginPopupContextItem("##row_menu")) {
    if (ImGui::MenuItem("Open", nullptr, false, !e.broken)) actions.push_back({ActionKind::OpenModel, 0, e.path});
    if (ImGui::MenuItem("Show in folder")) actions.push_back({ActionKind::ShowInFolder, 0, e.path});
    if (ImGui::MenuItem("Copy path")) ImGui::SetClipboardText(display_text(e.path).c_str());
    ImGui::EndPopup();
  }
  ImGui::PopID();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(e.source.c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_bytes(e.size_bytes).c_str());
  if (e.broken) {   // the reason in the last column, so it does not widen the others
    ImGui::TableSetColumnIndex(int(std::size(kColumns)) - 1);
    ImGui::TextDisabled("%s", e.error.c_str());
    return;
  }
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(e.arch.c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_count(int64_t(e.params)).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(e.weight_type.c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_count(e.context_length).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(e.chat_template.c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(fits_text(e).c_str());
}

void draw_table(ViewModel& vm, UiActions& actions, float height) {
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##library", int(std::size(kColumns)), flags, ImVec2(0, height))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const ColumnSpec& c : kColumns) ImGui::TableSetupColumn(c.title, c.flags);
  ImGui::TableHeadersRow();
  LibraryQuery query;
  query.text = vm.ui.library_filter;
  query.arch = vm.ui.library_arch;
  query.max_size_bytes = uint64_t(vm.ui.library_max_gib) << 30;
  read_sort(query);
  for (int32_t row : library_rows(vm.library.entries, query)) draw_row(vm, vm.library.entries[size_t(row)], row, actions);
  ImGui::EndTable();
}

// The user's folders (each removable) and the folders that could not be read.
void draw_folders(const ViewModel& vm, UiActions& actions) {
  for (const std::string& folder : vm.library.folders) {
    ImGui::PushID(folder.c_str());
    if (ImGui::SmallButton("Remove")) actions.push_back({ActionKind::RemoveLibraryFolder, 0, folder});
    ImGui::PopID();
    ImGui::SameLine();
    ImGui::TextUnformatted(folder.c_str());
  }
  for (const std::string& problem : vm.library.problems) ImGui::TextDisabled("%s", problem.c_str());
}

}  // namespace

void draw_library_panel(ViewModel& vm, UiActions& actions) {
  draw_filters(vm, actions);
  if (vm.library.scanning) {
    ImGui::TextDisabled("scanning... %zu models so far", vm.library.entries.size());
  } else {
    ImGui::TextDisabled("%s", vm.library.summary.c_str());
  }
  if (!vm.library.scanning && vm.library.entries.empty()) {
    ImGui::TextWrapped("No GGUF models in LM Studio's, Ollama's, Hugging Face's or llama.cpp's folders. "
                       "Open a file, add a folder that holds some, or drop a .gguf on the window.");
  }
  const float folder_lines = float(vm.library.folders.size() + vm.library.problems.size());
  const float below = folder_lines * ImGui::GetFrameHeightWithSpacing();
  draw_table(vm, actions, std::max(ImGui::GetContentRegionAvail().y - below, ImGui::GetFrameHeight() * 4));
  draw_folders(vm, actions);
}

}  // namespace kvdesk::ui
