// The model picker's "Server": chat through a remote OpenAI-compatible server (vLLM, SGLang,
// llama-server, kvdesk serve) instead of a local model. A popup takes its URL and API key;
// once connected it lists the server's models (/v1/models) to choose from.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "ui/fonts.h"
#include "ui/panels.h"
#include "ui/theme_colours.h"

namespace kvdesk::ui {
namespace {

void draw_server_models(ViewModel& vm, UiActions& actions) {
  const RemoteView& r = vm.remote;
  if (!r.connected) return;
  if (!r.models_error.empty()) {
    ImGui::TextColored(text_colour(TextTone::Error, vm.ui.layout_prefs.theme), "%s", r.models_error.c_str());
    return;
  }
  if (r.models.empty()) {
    ImGui::TextDisabled("reading the server's models ...");
    return;
  }
  ImGui::SetNextItemWidth(scaled_width(360));
  if (!ImGui::BeginCombo("server model", r.model.c_str())) return;
  for (const std::string& model : r.models) {
    if (ImGui::Selectable(model.c_str(), model == r.model)) actions.push_back({ActionKind::ChooseRemoteModel, 0, model});
  }
  ImGui::EndCombo();
}

}  // namespace

void draw_remote_picker(ViewModel& vm, UiActions& actions) {
  RemoteEdit& edit = vm.ui.remote_edit;
  if (ImGui::Button(vm.remote.connected ? "Server*" : "Server")) ImGui::OpenPopup("##remote_server");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Chat through an OpenAI-compatible server instead of a local model");
  if (!ImGui::BeginPopup("##remote_server")) return;
  ImGui::TextUnformatted("Connect to an OpenAI-compatible server");
  ImGui::SetNextItemWidth(scaled_width(360));
  const bool enter = ImGui::InputTextWithHint("URL", "http://127.0.0.1:8080", &edit.url, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SetNextItemWidth(scaled_width(360));
  ImGui::InputTextWithHint("API key", "none", &edit.api_key, ImGuiInputTextFlags_Password);
  ImGui::BeginDisabled(edit.url.empty() || vm.chat.generating);
  if (ImGui::Button("Connect") || enter) actions.push_back({ActionKind::ConnectRemote, 0, edit.url, edit.api_key});
  ImGui::EndDisabled();
  draw_server_models(vm, actions);
  ImGui::TextDisabled("KV types, saved KV and the KV pool's settings belong to the in-process engine;");
  ImGui::TextDisabled("a server keeps its own. Open a model file to go back to it.");
  ImGui::EndPopup();
}

}  // namespace kvdesk::ui
