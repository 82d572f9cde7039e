// "Serve over HTTP" in Settings: the address the app's own OpenAI-compatible server listens on
// (loopback by default; another host needs an API key), whether answered chats are kept as
// conversations, the toggle, where it listens and the HTTP requests in flight, or why it could
// not start.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "ui/fonts.h"
#include "ui/kv_report.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {

void draw_serve_settings(ViewModel& vm, UiActions& actions) {
  ServeEdit& edit = vm.ui.serve_edit;
  ImGui::TextUnformatted("Serve over HTTP (OpenAI-compatible, the same engine as this window)");
  ImGui::BeginDisabled(vm.serve.on);
  ImGui::SetNextItemWidth(scaled_width(160));
  ImGui::InputTextWithHint("host", "127.0.0.1", &edit.host);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled_width(110));
  ImGui::InputInt("port (0: any)", &edit.port, 1, 100);
  edit.port = std::clamp(edit.port, 0, 65535);
  ImGui::SetNextItemWidth(scaled_width(280));
  ImGui::InputTextWithHint("API key", "needed when the host is not 127.0.0.1", &edit.api_key, ImGuiInputTextFlags_Password);
  ImGui::Checkbox("keep served chats as conversations", &edit.keep_chats);
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("Each chat a client has answered shows in the list, tool calls and results included;\n"
                      "a client's next turn adds to the same conversation");
  }
  ImGui::EndDisabled();
  bool on = vm.serve.on;
  if (ImGui::Checkbox("serve", &on)) actions.push_back({ActionKind::ServeHttp, on ? 1 : 0});
  if (vm.serve.on) {
    ImGui::TextWrapped("%s", serving_line(vm.serve).c_str());
    if (vm.serve.kept > 0) ImGui::TextDisabled("%llu chats kept as conversations", static_cast<unsigned long long>(vm.serve.kept));
  } else if (!vm.serve.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, text_colour(TextTone::Error, vm.ui.layout_prefs.theme));
    ImGui::TextWrapped("%s", vm.serve.error.c_str());
    ImGui::PopStyleColor();
  }
}

}  // namespace kvdesk::ui
