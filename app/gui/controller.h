// Controller: the app's one place that sees everything. It carries out UiActions (engine
// and store), turns engine events into view-model updates and store saves, and refreshes the
// KV panels from the engine's statistics. UI thread only.
//
//   send:   user message committed -> empty Streaming answer committed -> engine.submit
//           (conversation_key = conversation id, so the next turn reuses the parked KV)
//   tokens: appended to the view at once, saved to the store at least every second
//   finish: final text, status and answer statistics saved; context and TTFT shown; the
//           conversation's parked KV exported, saved to the store once the export is ready
//   next turn of a conversation whose KV is not in the engine (after a restart, another
//           model): its saved KV imported before the turn is submitted
//
// The chat runs on ChatEngine: the in-process engine (which the app's HTTP server may serve
// at the same time) or a remote server. With a remote server, what only the in-process engine
// has (the KV pool's settings, a conversation's saved KV) is skipped or refused with a note.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/gui/app_options.h"
#include "app/gui/chat_engine.h"
#include "app/gui/http_serving.h"
#include "app/gui/kv_view.h"
#include "app/gui/served_chats.h"
#include "app/chat/chat_history.h"
#include "app/chat/kv_saver.h"
#include "app/chat/saved_kv.h"
#include "app/library/model_library.h"
#include "app/remote/model_list.h"
#include "app/store/conversation_store.h"
#include "engine/engine.h"
#include "ui/ui_actions.h"
#include "ui/view_model.h"

namespace kvdesk::gui {

class Controller {
 public:
  using Clock = std::chrono::steady_clock;

  // wake: called on the engine thread when events are ready (glfwPostEmptyEvent).
  Controller(ui::ViewModel& vm, std::function<void()> wake);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Opens the database (a bad one: a temporary database and a notice instead), restores the
  // conversations, presets and settings, and opens the model asked for or the last one used.
  void start(const AppOptions& options);

  // Carries out one action. A kvdesk::Error (bad input, store failure) becomes the status
  // line's error and false; nothing here ends the process.
  bool apply(const ui::UiAction& action);
  void apply_all(const ui::UiActions& actions);

  // Once per frame: engine events -> view and store; statistics -> KV panels (a few times
  // a second); streaming answers saved when a second has passed.
  void update();

  // Saves the window's arrangement (vm.ui.layout_prefs with this size, the open tab) for the
  // next start; call once, as the window closes.
  void remember_layout(int32_t width, int32_t height);

  bool quit_requested() const { return quit_; }
  bool streaming() const { return !live_.empty(); }
  // Whether the last finished answer failed (for scripts), with the engine's message.
  const std::string& last_failure() const { return last_failure_; }

 private:
  // An answer being generated.
  struct LiveAnswer {
    store::ConversationId conversation = 0;
    store::MessageId message = 0;
    std::string text;
    Clock::time_point last_save;
    std::string kv_source;   // "pool", "host tier", "database" or "recomputed (why)"
    chat::ChatTurn chat;     // what was submitted: the answer's token spans are stored against it
    bool continued = false;  // carries on an answer that stopped at its token limit (text holds it so far)
    int32_t earlier_tokens = 0;   // a continued answer's tokens before this turn
    bool opened_in_reasoning = false;   // the prompt opened the model's <think> (MessageView's)
    bool parks_kv = true;    // its sequence is parked under the conversation (not another variant's fork)
  };

  // What the prompt view was rendered from: the conversation, its messages as of a reload
  // (chat_revision_ counts reloads and system prompt changes) and the template in use.
  struct PromptViewKey {
    store::ConversationId conversation = 0;
    uint64_t chat_revision = 0;
    ui::ModelState model_state = ui::ModelState::None;
    std::string backend;
    std::string chat_template;
    std::string chat_template_source;
    std::string bos_text;
    std::string eos_text;

    bool operator==(const PromptViewKey&) const = default;
  };

  // --- controller.cpp: lifecycle, store <-> view, model and KV settings, statistics ---
  void open_store(const std::string& path);
  void load_preferences();
  void load_layout();   // the window's remembered arrangement; bad values: the defaults
  void set_theme(const std::string& name);
  void set_font_size(const std::string& text);   // pixels at a content scale of 1
  void reload_conversations();
  void reload_chat();
  std::vector<store::Message> readable_branch(store::ConversationId id);
  void select(store::ConversationId id);
  void open_model(const std::string& path);
  // The model area while a model (a file, or a server's URL) is being opened: Loading, no KV yet.
  void show_loading(const std::string& what);
  void reconfigure_kv();
  void save_sampling();
  void refresh_stats();
  void sample_plots(const EngineStats& stats);
  void sample_server_plots(const EngineStats& stats, const ServerStats& server);
  EngineSettings engine_settings(const std::string& model_path) const;
  void set_chat_template(const std::string& name);
  store::ConversationStore& store();
  void on_model_loaded(const std::string& note);

  // --- controller_serving.cpp: serving over HTTP, and chatting through a remote server ---
  void load_serving_preferences();
  // Connects to --remote's server, or to the last session's when it chatted through one and
  // no --model is given; false when the chat starts on the in-process engine.
  bool start_remote(const AppOptions& options);
  void serve_http(bool on);
  void refresh_serving();
  void keep_served_chats();
  void connect_remote(const std::string& url, const std::string& api_key, const std::string& model);
  void use_local_engine();
  void refresh_remote_models();
  void refresh_server_stats(const EngineStats& stats);
  void refuse_while_streaming(const std::string& what) const;

  // --- controller_kv_quality.cpp: what each KV type costs the loaded model ---
  // Shows the figures stored for the in-process engine's model and has the engine measure the
  // types without any.
  void start_kv_quality();
  void on_kv_quality(const Event& event);
  void forget_kv_quality();
  // vm_.kv_types' quality cells from kv_quality_.
  void show_kv_quality();

  // --- controller_model_load.cpp: a model load's progress, cancelling it ---
  void on_load_progress(double fraction);
  void cancel_model_load();
  void on_load_cancelled(const std::string& message);

  // --- controller_messages.cpp: one message: delete it, continue an answer ---
  void delete_message(store::MessageId id);
  void continue_answer(store::MessageId id);
  // A finished answer that stopped at its token limit (not by the user, an error or the context).
  static bool can_continue(const store::Message& m);
  // Stores the token ids a finished answer reported (a continued one: its earlier ids and the new).
  void save_answer_tokens(const LiveAnswer& live, const ChatTokens& reported);

  // --- controller_library.cpp: the model library and the file browser ---
  void start_library();    // the remembered folders, then a first scan
  void rescan_library();
  void refresh_library();  // the scanner's cards into the view, when they changed
  void save_library_folders();
  void add_library_folder(const std::string& folder);
  void remove_library_folder(const std::string& folder);
  void show_in_folder(const std::string& path);   // the file's folder in the desktop's file manager
  // Lists `folder` ("": the last one shown) into vm_.browser and remembers it; a folder that
  // cannot be listed leaves the one shown and says why.
  void browse(const std::string& folder);

  // --- controller_files.cpp: conversations to and from files ---
  void export_conversation(const std::string& format, const std::string& path);
  void import_conversation(const std::string& path);

  // --- controller_chat.cpp: conversations, messages, generation ---
  void new_chat();
  void rename(store::ConversationId id, const std::string& title);
  void remove(store::ConversationId id);
  void send(const std::string& text);
  // A new answer to the last user message; variants > 1: that many at once, sibling branches
  // sharing one prefill (the engine's parallel samples), the first of them shown.
  void regenerate(int32_t variants = 1);
  void edit_resend(store::MessageId id, const std::string& text);
  void switch_branch(store::MessageId id);
  void stop();
  void set_system_prompt(const std::string& text);
  // The selected conversation's own settings (vm.chat.settings) saved, then read back.
  void set_conversation_settings();
  void reload_conversation_settings();
  // Adds the empty answer under `parent` (variants of them) and submits the branch ending at
  // `parent` once, as that many parallel samples.
  void start_answer(store::ConversationId conversation, store::MessageId parent, int32_t variants = 1);
  Request make_request(store::ConversationId conversation, const chat::ChatTurn& chat);
  bool answers_open_in_reasoning();
  void on_event(const Event& event);
  void on_token(RequestId id, const std::string& text);
  void on_finished(RequestId id, const Event& event);
  void on_error(RequestId id, const std::string& message);
  void save_streaming_answers();
  ui::MessageView* view_message(store::MessageId id);
  std::optional<RequestId> live_request_of(store::ConversationId conversation) const;
  std::vector<RequestId> live_requests_of(store::ConversationId conversation) const;
  void set_status(const std::string& message, bool error);
  // While the chat shows the prompt as the model sees it: the selected conversation rendered
  // again when it, its messages or the chat template changed since the last rendering.
  void refresh_prompt_view();
  ui::PromptView prompt_view_of(store::ConversationId id);

  // --- controller_saved_kv.cpp: conversations' KV kept in the store between runs ---
  // Starts loading the conversation's saved KV in the background when the engine does not hold
  // it; update() imports it once loaded, so its next turn finds the KV already in the engine.
  void prefetch_kv(store::ConversationId conversation);
  void import_loaded_kv();
  bool wants_kv_import(store::ConversationId conversation) const;
  // The conversation's saved KV: a background load's result (waited for), else loaded now.
  chat::SavedKv take_saved_kv(store::ConversationId conversation);
  // Imports the conversation's saved KV unless the engine holds it; says where its KV comes from.
  std::string restore_kv(store::ConversationId conversation);
  // The import's refusal, if any, once the turn it preceded has finished.
  std::string resolve_kv_source(store::ConversationId conversation, const std::string& source);
  void request_kv_save(store::ConversationId conversation);
  // Hands finished exports to kv_saver_ and reports what its saves came to.
  void save_ready_kv();
  void save_all_kv();   // waits for every pending export and save (closing)
  void save_exported_kv(store::ConversationId conversation, std::optional<ConversationKv> kv);
  void report_kv_saves();
  void forget_kv(store::ConversationId conversation);

  ui::ViewModel& vm_;
  ChatEngine engine_;
  std::unique_ptr<HttpServing> serving_;   // set while the app serves over HTTP
  ServedChats served_chats_;               // what its answered chats were added to
  std::future<std::vector<remote::ServerModel>> remote_models_;   // the connected server's list, being read
  std::optional<store::ConversationStore> store_;
  AppOptions options_;
  std::map<RequestId, LiveAnswer> live_;
  bool quit_ = false;
  uint64_t chat_revision_ = 0;
  std::optional<PromptViewKey> prompt_key_;
  bool reconfiguring_ = false;
  std::string last_failure_;
  Clock::time_point model_load_started_;
  Clock::time_point last_stats_;
  Clock::time_point last_plot_sample_;
  uint64_t last_stats_steps_ = 0;
  std::optional<double> last_server_generated_;   // the remote server's generated tokens at the last plot sample
  // Conversations whose KV the engine holds parked since the model loaded (answered or imported).
  std::set<store::ConversationId> kv_in_pool_;
  std::map<store::ConversationId, std::future<std::string>> kv_imports_;
  std::map<store::ConversationId, std::future<chat::SavedKv>> kv_loads_;
  std::map<store::ConversationId, std::future<std::optional<ConversationKv>>> kv_exports_;
  // The KV quality of the in-process engine's model (ModelSummary::identity); results for any
  // other model (one replaced while it was measured) are dropped.
  std::string kv_quality_model_;
  KvQualities kv_quality_;
  std::optional<chat::KvSaver> kv_saver_;   // after store_: destroyed first, its saves written
  library::LibraryScanner library_;
  uint64_t library_generation_ = 0;   // of the scanner's snapshot last shown
};

}  // namespace kvdesk::gui
