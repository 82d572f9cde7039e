// The desktop window's panels, one file each. A panel draws part of the ViewModel with ImGui
// and appends what the user asked for to UiActions; it never calls the engine or the store.
// main_window.cpp lays them out: model bar on top, conversations | chat | KV tabs, status line.
#pragma once
#include <optional>
#include <string_view>

#include "ui/fonts.h"
#include "ui/texture_cache.h"
#include "ui/ui_actions.h"
#include "ui/view_model.h"

namespace kvdesk::ui {

// The whole window for one frame (call between ImGui::NewFrame and ImGui::Render).
// Images (the block map) go through textures, which the renderer's owner provides.
UiActions draw_main_window(ViewModel& vm, const Fonts& fonts, TextureCache& textures);

void draw_model_bar(ViewModel& vm, UiActions& actions);
void draw_file_prompt(ViewModel& vm, UiActions& actions);
void draw_library_panel(ViewModel& vm, UiActions& actions);
void draw_file_browser(ViewModel& vm, UiActions& actions);
void draw_conversation_list_panel(ViewModel& vm, UiActions& actions);
void draw_chat_panel(ViewModel& vm, const Fonts& fonts, UiActions& actions);
void draw_conversation_settings(ViewModel& vm, UiActions& actions);
void draw_prompt_view(ViewModel& vm, const Fonts& fonts);
void draw_settings_panel(ViewModel& vm, UiActions& actions);
void draw_model_info_panel(const ViewModel& vm);
void draw_block_map_panel(const ViewModel& vm, TextureCache& textures);
void draw_fragmentation_panel(ViewModel& vm);
void draw_sharing_panel(const ViewModel& vm);
void draw_quantization_panel(ViewModel& vm, UiActions& actions);
void draw_memory_budget_panel(const ViewModel& vm);
void draw_time_plots_panel(const ViewModel& vm);
void draw_serve_settings(ViewModel& vm, UiActions& actions);
void draw_remote_picker(ViewModel& vm, UiActions& actions);
void draw_server_stats(const ViewModel& vm);

// Tab names of the side panels: "settings", "model", "blocks", "fragmentation", "sharing",
// "quantization", "memory", "plots" (what scripts' open_panel takes).
const char* panel_name(Panel panel);
std::optional<Panel> panel_from_name(std::string_view name);

const char* theme_name(Theme theme);   // "dark", "light"
std::optional<Theme> theme_from_name(std::string_view name);
// Sets ImGui's colours to the theme (call between frames).
void apply_theme(Theme theme);

}  // namespace kvdesk::ui
