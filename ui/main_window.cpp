// The main window: one borderless window filling the viewport. Model bar and menu on top;
// below it three columns (conversations | chat | side panels as tabs) whose borders drag (the
// shares are remembered, vm.ui.layout_prefs) and a status line.
#include <imgui.h>

#include <algorithm>
#include <string_view>

#include "ui/fonts.h"
#include "ui/keyboard.h"
#include "ui/panel_data.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

constexpr Panel kPanels[] = {Panel::Settings, Panel::Model, Panel::Blocks, Panel::Fragmentation, Panel::Sharing,
                             Panel::Quantization, Panel::Memory, Panel::Plots};

const char* panel_title(Panel panel) {
  switch (panel) {
    case Panel::Settings: return "Settings";
    case Panel::Model: return "Model";
    case Panel::Blocks: return "Blocks";
    case Panel::Fragmentation: return "Waste";
    case Panel::Sharing: return "Sharing";
    case Panel::Quantization: return "KV types";
    case Panel::Memory: return "Memory";
    case Panel::Plots: return "Plots";
  }
  return "?";
}

void draw_panel(Panel panel, ViewModel& vm, TextureCache& textures, UiActions& actions) {
  switch (panel) {
    case Panel::Settings: draw_settings_panel(vm, actions); break;
    case Panel::Model: draw_model_info_panel(vm); break;
    case Panel::Blocks: draw_block_map_panel(vm, textures); break;
    case Panel::Fragmentation: draw_fragmentation_panel(vm); break;
    case Panel::Sharing: draw_sharing_panel(vm); break;
    case Panel::Quantization: draw_quantization_panel(vm, actions); break;
    case Panel::Memory: draw_memory_budget_panel(vm); break;
    case Panel::Plots: draw_time_plots_panel(vm); break;
  }
}

void draw_menu_bar(ViewModel& vm, UiActions& actions) {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("New chat", "Ctrl+N")) actions.push_back({ActionKind::NewChat});
    if (ImGui::MenuItem("Open model...")) {
      vm.ui.browser_purpose = BrowsePurpose::OpenModel;
      actions.push_back({ActionKind::BrowseFolder, 0, vm.browser.folder});
    }
    if (ImGui::MenuItem("Model library", nullptr, vm.ui.show_library)) vm.ui.show_library = !vm.ui.show_library;
    ImGui::Separator();
    const bool selected = vm.chat.conversation_id != 0;
    if (ImGui::MenuItem("Export as Markdown...", nullptr, false, selected)) vm.ui.file_prompt = "md";
    if (ImGui::MenuItem("Export as JSON...", nullptr, false, selected)) vm.ui.file_prompt = "json";
    if (ImGui::MenuItem("Import JSON...")) vm.ui.file_prompt = "import";
    ImGui::Separator();
    if (ImGui::MenuItem("Quit")) actions.push_back({ActionKind::Quit});
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (Panel p : kPanels) {
      if (ImGui::MenuItem(panel_title(p), nullptr, vm.ui.panel == p)) {
        vm.ui.panel = p;
        vm.ui.panel_requested = true;
      }
    }
    ImGui::Separator();
    for (Theme theme : {Theme::Dark, Theme::Light}) {
      const std::string label = theme == Theme::Dark ? "Dark theme" : "Light theme";
      if (ImGui::MenuItem(label.c_str(), nullptr, vm.ui.layout_prefs.theme == theme)) {
        actions.push_back({ActionKind::SetTheme, 0, theme_name(theme)});
      }
    }
    ImGui::EndMenu();
  }
  ImGui::EndMenuBar();
}

// The KV panels as tabs. A requested panel is selected on this frame's tab bar and takes
// over vm.ui.panel from the next frame on (the old tab is still drawn this frame).
void draw_side_tabs(ViewModel& vm, TextureCache& textures, UiActions& actions) {
  // Scrolling tabs keep every title whole when the column is narrow.
  if (!ImGui::BeginTabBar("##panels", ImGuiTabBarFlags_FittingPolicyScroll)) return;
  for (Panel p : kPanels) {
    const ImGuiTabItemFlags flags = vm.ui.panel_requested && vm.ui.panel == p ? ImGuiTabItemFlags_SetSelected : 0;
    if (ImGui::BeginTabItem(panel_title(p), nullptr, flags)) {
      if (!vm.ui.panel_requested) vm.ui.panel = p;
      draw_panel(p, vm, textures, actions);
      ImGui::EndTabItem();
    }
  }
  ImGui::EndTabBar();
  vm.ui.panel_requested = false;
}

// A bar as wide as the gap between two columns; dragging it moves their border with the mouse,
// changing `share` (of `total` width; `direction` -1 when the share lies right of the bar).
void column_splitter(const char* id, float height, float total, float direction, float& share, float low, float high) {
  ImGui::SameLine(0, 0);
  ImGui::InvisibleButton(id, ImVec2(ImGui::GetStyle().ItemSpacing.x, height));
  if (ImGui::IsItemActive() || ImGui::IsItemHovered()) ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
  if (ImGui::IsItemActive() && total > 0) {
    share = std::clamp(share + direction * ImGui::GetIO().MouseDelta.x / total, low, high);
  }
  ImGui::SameLine(0, 0);
}

float text_width(std::string_view text) { return ImGui::CalcTextSize(text.data(), text.data() + text.size()).x; }

// The status line, the last action's outcome and the font note, fitted so none overlaps
// another; what had to go is shown in full on hover.
void draw_status_line(ViewModel& vm) {
  const float start_x = ImGui::GetCursorPosX();
  const float width = ImGui::GetContentRegionAvail().x;
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  const std::string line = status_line(vm);
  const StatusBarFit fit = fit_status_bar(line, vm.status.message, vm.status.font_note, width, gap, text_width);
  vm.ui.layout.record("status line", fit.width, width);
  ImGui::BeginGroup();
  ImGui::TextUnformatted(fit.line.c_str());
  if (!fit.message.empty()) {
    ImGui::SameLine(0, gap);
    const ImVec4 colour = text_colour(vm.status.message_is_error ? TextTone::Error : TextTone::Good, vm.ui.layout_prefs.theme);
    ImGui::TextColored(colour, "%s", fit.message.c_str());
  }
  if (fit.show_note) {
    ImGui::SameLine(start_x + width - text_width(vm.status.font_note));
    ImGui::TextDisabled("%s", vm.status.font_note.c_str());
  }
  ImGui::EndGroup();
  const bool shortened = fit.line != line || !fit.show_note || fit.message.size() < vm.status.message.size() + 2;
  if (shortened && ImGui::IsItemHovered()) {
    ImGui::SetTooltip("%s\n%s\n%s", line.c_str(), vm.status.message.c_str(), vm.status.font_note.c_str());
  }
}

// The window's shortcuts (ui/shortcuts.h); each only when it can do something now.
void handle_shortcuts(ViewModel& vm, UiActions& actions) {
  const ImGuiIO& io = ImGui::GetIO();
  for (const char* key : kShortcutKeys) {
    if (!ImGui::IsKeyPressed(key_index(key), false)) continue;
    switch (shortcut_for({io.KeyCtrl, io.KeyShift, io.KeyAlt, key})) {
      case Shortcut::None: break;
      case Shortcut::NewChat:
        actions.push_back({ActionKind::NewChat});
        vm.ui.focus_composer = true;
        break;
      case Shortcut::FocusSearch: vm.ui.focus_search = true; break;
      case Shortcut::Stop:
        if (vm.chat.generating) actions.push_back({ActionKind::Stop});
        break;
      case Shortcut::Regenerate:
        if (!vm.chat.generating && !vm.chat.messages.empty() && vm.model.state == ModelState::Loaded) {
          actions.push_back({ActionKind::Regenerate});
        }
        break;
    }
  }
}

void draw_modal(ViewModel& vm) {
  if (!vm.status.modal.empty() && !ImGui::IsPopupOpen("Notice")) ImGui::OpenPopup("Notice");
  if (!ImGui::BeginPopupModal("Notice", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  ImGui::PushTextWrapPos(520);
  ImGui::TextUnformatted(vm.status.modal.c_str());
  ImGui::PopTextWrapPos();
  if (ImGui::Button("OK", ImVec2(scaled_width(120), 0))) {
    vm.status.modal.clear();
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

}  // namespace

const char* panel_name(Panel panel) {
  switch (panel) {
    case Panel::Settings: return "settings";
    case Panel::Model: return "model";
    case Panel::Blocks: return "blocks";
    case Panel::Fragmentation: return "fragmentation";
    case Panel::Sharing: return "sharing";
    case Panel::Quantization: return "quantization";
    case Panel::Memory: return "memory";
    case Panel::Plots: return "plots";
  }
  return "?";
}

std::optional<Panel> panel_from_name(std::string_view name) {
  for (Panel p : kPanels) {
    if (name == panel_name(p)) return p;
  }
  return std::nullopt;
}

const char* theme_name(Theme theme) { return theme == Theme::Light ? "light" : "dark"; }

std::optional<Theme> theme_from_name(std::string_view name) {
  if (name == "dark") return Theme::Dark;
  if (name == "light") return Theme::Light;
  return std::nullopt;
}

void apply_theme(Theme theme) {
  if (theme == Theme::Light) {
    ImGui::StyleColorsLight();
  } else {
    ImGui::StyleColorsDark();
  }
}

UiActions draw_main_window(ViewModel& vm, const Fonts& fonts, TextureCache& textures) {
  UiActions actions;
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  // No background: the window covers the whole viewport, whose clear colour is the window
  // colour (app/gui/main.cpp). Clearing is a memset; a full-screen background quad costs a
  // software rasterizer (Mesa llvmpipe) a shaded, blended million pixels every frame.
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_MenuBar |
                                 ImGuiWindowFlags_NoBackground;
  ImGui::Begin("kvdesk", nullptr, flags);
  vm.ui.layout.clear(viewport->WorkSize.x, viewport->WorkSize.y);
  draw_menu_bar(vm, actions);
  draw_model_bar(vm, actions);

  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float height = avail.y - ImGui::GetFrameHeightWithSpacing();
  WindowLayout& prefs = vm.ui.layout_prefs;
  const float left = std::max(180.0f, avail.x * prefs.left_share);
  const float right = std::max(380.0f, avail.x * prefs.right_share);
  const float middle = std::max(200.0f, avail.x - left - right - 2 * style.ItemSpacing.x);

  ImGui::BeginChild("##left", ImVec2(left, height), true);
  draw_conversation_list_panel(vm, actions);
  ImGui::EndChild();
  column_splitter("##split_left", height, avail.x, 1, prefs.left_share, kMinLeftShare, kMaxLeftShare);
  if (vm.ui.show_library) {   // the library's table takes the chat's and the panels' width
    ImGui::BeginChild("##library", ImVec2(0, height), true);
    draw_library_panel(vm, actions);
    ImGui::EndChild();
  } else {
    ImGui::BeginChild("##chat", ImVec2(middle, height), true);
    draw_chat_panel(vm, fonts, actions);
    ImGui::EndChild();
    column_splitter("##split_right", height, avail.x, -1, prefs.right_share, kMinRightShare, kMaxRightShare);
    ImGui::BeginChild("##kv", ImVec2(0, height), true);
    draw_side_tabs(vm, textures, actions);
    ImGui::EndChild();
  }

  draw_status_line(vm);
  handle_shortcuts(vm, actions);
  draw_file_prompt(vm, actions);
  draw_file_browser(vm, actions);
  draw_modal(vm);
  ImGui::End();
  return actions;
}

}  // namespace kvdesk::ui
