// Controller, part 5: the app's HTTP server and remote servers. Serving starts and stops the
// HttpServing over the window's own engine, keeps the chats it answered as conversations, and
// remembers the address (and whether it was on) in the settings; connecting hands the chat to a remote server's RemoteEngine, reads the
// models it lists in the background, and remembers it so the next start connects again.
#include <algorithm>

#include "app/gui/controller.h"
#include "engine/error.h"

namespace kvdesk::gui {
namespace {

constexpr const char* kServeOnKey = "serve.on";
constexpr const char* kServeHostKey = "serve.host";
constexpr const char* kServePortKey = "serve.port";
constexpr const char* kServeApiKeyKey = "serve.api_key";
constexpr const char* kServeKeepChatsKey = "serve.keep_chats";
constexpr const char* kRemoteOnKey = "remote.on";
constexpr const char* kRemoteUrlKey = "remote.url";
constexpr const char* kRemoteApiKeyKey = "remote.api_key";

bool is_ready(const auto& future) {
  return future.valid() && future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

ui::ServerStatsView server_stats_view(const ServerStats& s) {
  return {s.kind, s.kv_usage, s.kv_tokens, s.running, s.waiting, s.prefix_hit_rate, s.preemptions,
          s.block_size, s.num_blocks, s.prompt_tokens, s.generation_tokens};
}

}  // namespace

void Controller::load_serving_preferences() {
  ui::ServeEdit& serve = vm_.ui.serve_edit;
  if (auto host = store().setting(kServeHostKey); host && !host->empty()) serve.host = *host;
  if (auto port = store().setting(kServePortKey)) {
    try {
      serve.port = std::clamp(std::stoi(*port), 0, 65535);
    } catch (const std::exception&) {
    }
  }
  if (auto key = store().setting(kServeApiKeyKey)) serve.api_key = *key;
  if (auto keep = store().setting(kServeKeepChatsKey)) serve.keep_chats = *keep != "0";
  if (auto url = store().setting(kRemoteUrlKey); url && !url->empty()) vm_.ui.remote_edit.url = *url;
  if (auto key = store().setting(kRemoteApiKeyKey)) vm_.ui.remote_edit.api_key = *key;
  if (store().setting(kServeOnKey) == "1") apply({ui::ActionKind::ServeHttp, 1});
}

bool Controller::start_remote(const AppOptions& options) {
  if (!options.remote_url.empty()) {
    vm_.ui.remote_edit.url = options.remote_url;
    vm_.ui.remote_edit.api_key = options.remote_api_key;
  } else if (!options.model_path.empty() || store().setting(kRemoteOnKey) != "1") {
    return false;
  }
  apply({ui::ActionKind::ConnectRemote, 0, vm_.ui.remote_edit.url, vm_.ui.remote_edit.api_key});
  return true;
}

// ---------------------------------------------------------------------------------------
// Serving over HTTP
// ---------------------------------------------------------------------------------------
void Controller::serve_http(bool on) {
  if (serving_) {
    serving_->stop();
    keep_served_chats();
  }
  serving_.reset();
  vm_.serve = ui::ServeView{};
  store().set_setting(kServeOnKey, on ? "1" : "0");
  if (!on) {
    set_status("stopped serving over HTTP", false);
    return;
  }
  const ui::ServeEdit& edit = vm_.ui.serve_edit;
  store().set_setting(kServeHostKey, edit.host);
  store().set_setting(kServePortKey, std::to_string(edit.port));
  store().set_setting(kServeApiKeyKey, edit.api_key);
  store().set_setting(kServeKeepChatsKey, edit.keep_chats ? "1" : "0");
  try {
    serving_ = std::make_unique<HttpServing>(engine_.share(),
                                             ServeSettings{edit.host, edit.port, edit.api_key, edit.keep_chats},
                                             engine_.local().stats().model_loaded);
  } catch (const Error& e) {
    vm_.serve.error = e.what();
    store().set_setting(kServeOnKey, "0");
    throw;
  }
  vm_.serve.on = true;
  vm_.serve.url = serving_->url();
  set_status("serving the in-process engine on " + serving_->url(), false);
}

void Controller::refresh_serving() {
  if (!serving_) return;
  const ServingLoad load = serving_->load(engine_.local().stats());
  vm_.serve.running = load.running;
  vm_.serve.waiting = load.waiting;
  vm_.serve.served = load.ended;
  keep_served_chats();
}

// The chats the server answered become conversations (served_chats.h); the list and an open
// one that grew are shown again.
void Controller::keep_served_chats() {
  const std::vector<server::ServedChat> chats = serving_->take_answered_chats();
  if (chats.empty()) return;
  try {
    const std::vector<store::ConversationId> changed = served_chats_.record(store(), chats, serving_->url());
    vm_.serve.kept += chats.size();
    reload_conversations();
    if (std::find(changed.begin(), changed.end(), vm_.chat.conversation_id) != changed.end()) reload_chat();
  } catch (const Error& e) {
    set_status(std::string("keeping a served chat failed: ") + e.what(), true);
  }
}

// ---------------------------------------------------------------------------------------
// A remote server
// ---------------------------------------------------------------------------------------
void Controller::refuse_while_streaming(const std::string& what) const {
  if (!live_.empty()) throw Error("answers are still being generated: stop them before " + what);
}

void Controller::connect_remote(const std::string& url, const std::string& api_key, const std::string& model) {
  if (url.rfind("http://", 0) != 0) throw Error("'" + url + "' is not a server address: write http://HOST:PORT");
  refuse_while_streaming("switching to a server");
  remote::RemoteOptions options(url, api_key);
  options.model = model;
  engine_.connect(std::move(options));
  show_loading(url);
  vm_.remote = ui::RemoteView{};
  vm_.remote.connected = true;
  vm_.remote.url = url;
  vm_.plots = ui::TimeSeriesView{};
  last_server_generated_.reset();
  kv_in_pool_.clear();
  remote_models_ = remote::list_server_models_async(url, api_key);
  store().set_setting(kRemoteOnKey, "1");
  store().set_setting(kRemoteUrlKey, url);
  store().set_setting(kRemoteApiKeyKey, api_key);
  set_status("connecting to " + url, false);
}

void Controller::use_local_engine() {
  refuse_while_streaming("leaving the server");
  engine_.use_local();
  vm_.remote = ui::RemoteView{};
  store().set_setting(kRemoteOnKey, "0");
}

void Controller::refresh_remote_models() {
  if (!is_ready(remote_models_)) return;
  try {
    for (const remote::ServerModel& m : remote_models_.get()) vm_.remote.models.push_back(m.id);
  } catch (const Error& e) {
    vm_.remote.models_error = e.what();
  }
}

void Controller::refresh_server_stats(const EngineStats& stats) {
  if (!engine_.is_remote()) return;
  vm_.remote.model = stats.model.name;
  vm_.remote.stats_reads = stats.steps;
  vm_.remote.stats_read = stats.server.has_value() && stats.server->kind != "unknown";
  if (stats.server) vm_.remote.stats = server_stats_view(*stats.server);
}

}  // namespace kvdesk::gui
