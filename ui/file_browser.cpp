// The file browser: a modal for choosing a model file to open or a folder for the library. A
// path bar (type a folder and press Enter), Up, folders first, then .gguf files (or every file),
// keyboard navigation (arrows move, Enter opens, Backspace goes up, Esc closes). The app lists
// the folder (vm.browser) and remembers the last one shown; this only draws and asks.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <string>

#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::ui {
namespace {

constexpr const char* kPopup = "Choose a model";

std::string parent_of(const std::string& folder) {
  const size_t slash = folder.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return folder.substr(0, slash);
}

std::string child_of(const std::string& folder, const std::string& name) {
  return folder == "/" ? "/" + name : folder + "/" + name;
}

// The entries shown: every folder, and files that are .gguf unless all files are asked for.
std::vector<int32_t> shown_entries(const ViewModel& vm) {
  std::vector<int32_t> shown;
  for (size_t i = 0; i < vm.browser.entries.size(); ++i) {
    const FileBrowserEntry& e = vm.browser.entries[i];
    if (e.is_folder || vm.ui.browser_all_files || e.is_model) shown.push_back(int32_t(i));
  }
  return shown;
}

void close_browser(ViewModel& vm) {
  vm.ui.browser_purpose = BrowsePurpose::None;
  ImGui::CloseCurrentPopup();
}

// Opens a folder entry, or chooses a file entry (opening the model).
void activate(ViewModel& vm, const FileBrowserEntry& e, UiActions& actions) {
  const std::string path = child_of(vm.browser.folder, e.name);
  if (e.is_folder) {
    vm.ui.browser_selected = -1;
    actions.push_back({ActionKind::BrowseFolder, 0, path});
  } else if (vm.ui.browser_purpose == BrowsePurpose::OpenModel) {
    actions.push_back({ActionKind::OpenModel, 0, path});
    vm.ui.model_path = path;
    close_browser(vm);
  }
}

bool key_pressed(ImGuiKey key) { return ImGui::IsKeyPressed(ImGui::GetKeyIndex(key)); }

// Arrow keys, Enter and Backspace while no text field has the keyboard.
void handle_keys(ViewModel& vm, const std::vector<int32_t>& shown, UiActions& actions) {
  if (ImGui::GetIO().WantTextInput) return;
  int32_t& selected = vm.ui.browser_selected;
  const int32_t last = int32_t(shown.size()) - 1;
  if (key_pressed(ImGuiKey_DownArrow) && last >= 0) selected = std::min(selected + 1, last);
  if (key_pressed(ImGuiKey_UpArrow) && last >= 0) selected = std::max(selected - 1, 0);
  if (key_pressed(ImGuiKey_Enter) && selected >= 0 && selected <= last) {
    activate(vm, vm.browser.entries[size_t(shown[size_t(selected)])], actions);
  }
  if (key_pressed(ImGuiKey_Backspace)) {
    selected = -1;
    actions.push_back({ActionKind::BrowseFolder, 0, parent_of(vm.browser.folder)});
  }
}

void draw_path_bar(ViewModel& vm, UiActions& actions) {
  if (ImGui::Button("Up")) actions.push_back({ActionKind::BrowseFolder, 0, parent_of(vm.browser.folder)});
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(520));
  if (ImGui::InputText("##browser_path", &vm.ui.browser_path, ImGuiInputTextFlags_EnterReturnsTrue)) {
    actions.push_back({ActionKind::BrowseFolder, 0, vm.ui.browser_path});
  }
}

void draw_entries(ViewModel& vm, const std::vector<int32_t>& shown, UiActions& actions) {
  ImGui::BeginChild("##browser_entries", ImVec2(scaled_width(620), scaled_width(340)), true);
  if (!vm.browser.error.empty()) ImGui::TextDisabled("%s", vm.browser.error.c_str());
  for (size_t i = 0; i < shown.size(); ++i) {
    const FileBrowserEntry& e = vm.browser.entries[size_t(shown[i])];
    const std::string label = e.is_folder ? e.name + "/" : e.name + "  (" + format_bytes(e.size_bytes) + ")";
    const bool selected = vm.ui.browser_selected == int32_t(i);
    if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_AllowDoubleClick)) {
      vm.ui.browser_selected = int32_t(i);
      if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) activate(vm, e, actions);
    }
    if (selected && ImGui::IsWindowAppearing()) ImGui::SetScrollHereY();
  }
  ImGui::EndChild();
}

void draw_buttons(ViewModel& vm, const std::vector<int32_t>& shown, UiActions& actions) {
  ImGui::Checkbox("All files", &vm.ui.browser_all_files);
  ImGui::SameLine();
  if (vm.ui.browser_purpose == BrowsePurpose::AddLibraryFolder) {
    if (ImGui::Button("Add this folder")) {
      actions.push_back({ActionKind::AddLibraryFolder, 0, vm.browser.folder});
      close_browser(vm);
      return;
    }
  } else {
    const int32_t s = vm.ui.browser_selected;
    const bool file_selected = s >= 0 && s < int32_t(shown.size()) && !vm.browser.entries[size_t(shown[size_t(s)])].is_folder;
    ImGui::BeginDisabled(!file_selected);
    if (ImGui::Button("Open")) {
      activate(vm, vm.browser.entries[size_t(shown[size_t(s)])], actions);
      ImGui::EndDisabled();
      return;
    }
    ImGui::EndDisabled();
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) close_browser(vm);
}

}  // namespace

void draw_file_browser(ViewModel& vm, UiActions& actions) {
  if (vm.ui.browser_purpose != BrowsePurpose::None && !ImGui::IsPopupOpen(kPopup)) {
    vm.ui.browser_path = vm.browser.folder;
    ImGui::OpenPopup(kPopup);
  }
  if (!ImGui::BeginPopupModal(kPopup, nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  if (!ImGui::IsItemActive() && vm.ui.browser_path != vm.browser.folder && !ImGui::GetIO().WantTextInput) {
    vm.ui.browser_path = vm.browser.folder;   // a folder the app listed since
  }
  ImGui::TextUnformatted(vm.ui.browser_purpose == BrowsePurpose::AddLibraryFolder ? "Choose a folder for the library"
                                                                                  : "Choose a .gguf model to open");
  const std::vector<int32_t> shown = shown_entries(vm);
  draw_path_bar(vm, actions);
  draw_entries(vm, shown, actions);
  draw_buttons(vm, shown, actions);
  if (vm.ui.browser_purpose != BrowsePurpose::None) handle_keys(vm, shown, actions);
  ImGui::EndPopup();
}

}  // namespace kvdesk::ui
