// Controller, part 1: starting up (store, preferences, remembered layout, model), the action dispatcher,
// store -> view reloads, model and KV settings, and the statistics the KV panels draw.
// Conversations, messages and generation are in controller_chat.cpp.
#include "app/gui/controller.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "app/gui/kv_view.h"
#include "app/gui/model_file.h"
#include "app/gui/tool_views.h"
#include "engine/error.h"
#include "ui/font_size.h"
#include "ui/panel_data.h"
#include "ui/panels.h"

namespace kvdesk::gui {
namespace {

constexpr auto kStatsInterval = std::chrono::milliseconds(150);
constexpr auto kPlotInterval = std::chrono::seconds(1);
constexpr size_t kPlotSamples = 300;   // five minutes
constexpr uint64_t kMiB = uint64_t(1) << 20;

// Reads a numeric setting into value; a missing or unreadable one leaves the default.
template <class T>
void read_setting(store::ConversationStore& store, const char* key, T& value) {
  const std::optional<std::string> text = store.setting(key);
  if (!text) return;
  try {
    if constexpr (std::is_same_v<T, float>) {
      value = std::stof(*text);
    } else if constexpr (std::is_same_v<T, bool>) {
      value = *text == "1";
    } else {
      value = T(std::stoll(*text));
    }
  } catch (const std::exception&) {
  }
}

// The numeric preferences and their keys in the settings table, one list each for loading
// and saving.
template <class F>
void for_each_sampling_setting(ui::SamplingView& p, F&& f) {
  f("sampling.context_length", p.context_length);
  f("sampling.temperature", p.temperature);
  f("sampling.top_k", p.top_k);
  f("sampling.top_p", p.top_p);
  f("sampling.min_p", p.min_p);
  f("sampling.repeat_penalty", p.repeat_penalty);
  f("sampling.max_tokens", p.max_tokens);
  f("sampling.seed", p.seed);
  f("sampling.slide_context", p.slide_context);
  f("sampling.retention", p.retention);
  f("sampling.kv_keep", p.kv_keep);
}

template <class F>
void for_each_kv_setting(ui::KvSettingsEdit& kv, F&& f) {
  f("kv.block_size", kv.block_size);
  f("kv.budget_mib", kv.budget_mib);
  f("kv.prefix_caching", kv.prefix_caching);
  f("kv.host_tier_mib", kv.host_tier_mib);
}

constexpr const char* kKTypeKey = "kv.k_type";
constexpr const char* kVTypeKey = "kv.v_type";
constexpr const char* kChatTemplateKey = "chat.template";
constexpr const char* kWindowWidthKey = "window.width";
constexpr const char* kWindowHeightKey = "window.height";
constexpr const char* kLeftShareKey = "layout.left_share";
constexpr const char* kRightShareKey = "layout.right_share";
constexpr const char* kPanelKey = "layout.panel";
constexpr const char* kThemeKey = "ui.theme";
constexpr const char* kFontSizeKey = "ui.font_size";
constexpr int64_t kMinWindowSide = 200;
constexpr int64_t kMaxWindowSide = 8192;

// Also false for NaN.
template <class T>
bool in_range(T value, T low, T high) {
  return value >= low && value <= high;
}

template <class T>
std::string setting_text(T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "1" : "0";
  } else {
    return std::to_string(value);
  }
}

KvType kv_type_or_throw(const std::string& name) {
  const std::optional<KvType> type = kv_type_from_name(name);
  if (!type) throw Error("unknown KV type '" + name + "'");
  return *type;
}

}  // namespace

Controller::Controller(ui::ViewModel& vm, std::function<void()> wake) : vm_(vm), engine_(std::move(wake)) {}

Controller::~Controller() {
  save_all_kv();
  // Answers still streaming keep what they have (marked Stopped) before the engine goes.
  for (auto& [id, live] : live_) {
    try {
      store().update_message(live.message, live.text, store::MessageStatus::Stopped);
    } catch (const Error&) {
    }
  }
}

void Controller::start(const AppOptions& options) {
  options_ = options;
  open_store(options.db_path.empty() ? store::default_database_path().string() : options.db_path);
  load_preferences();
  load_layout();
  load_serving_preferences();
  reload_conversations();
  if (!vm_.conversations.empty()) select(vm_.conversations.front().id);
  start_library();
  if (start_remote(options)) return;
  std::string model = options.model_path;
  if (model.empty()) {
    const std::vector<store::RecentModel> recent = store().recent_models();
    if (!recent.empty()) model = recent.front().path;
  }
  vm_.ui.model_path = model;
  vm_.ui.show_library = model.empty();   // nothing to chat with yet: start on the library
  if (!model.empty()) apply({ui::ActionKind::OpenModel, 0, model});
}

void Controller::open_store(const std::string& path) {
  try {
    store_.emplace(store::ConversationStore::open(path));
  } catch (const Error& e) {
    const std::filesystem::path fallback =
        std::filesystem::temp_directory_path() / ("kvdesk-temporary-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(fallback);
    store_.emplace(store::ConversationStore::open(fallback));
    vm_.status.modal = std::string("Could not open the conversation database:\n") + e.what() +
                       "\n\nThis session uses a temporary database (" + fallback.string() +
                       "); its conversations will not be kept.";
    set_status("database not opened; using a temporary one", true);
  }
  kv_saver_.emplace(store().path());
  const int64_t interrupted = store().mark_interrupted_answers();
  if (interrupted > 0) set_status(std::to_string(interrupted) + " answer(s) were interrupted last time", false);
}

store::ConversationStore& Controller::store() {
  KVDESK_ASSERT(store_.has_value());
  return *store_;
}

void Controller::load_preferences() {
  store::ConversationStore& s = store();
  ui::SamplingView& p = vm_.sampling;
  ui::KvSettingsEdit& kv = vm_.ui.kv_edit;
  const auto read = [&](const char* key, auto& value) { read_setting(s, key, value); };
  for_each_sampling_setting(p, read);
  for_each_kv_setting(kv, read);
  p.retention = std::clamp(p.retention, 0, int32_t(std::size(ui::kRetentionPolicyNames)) - 1);
  p.kv_keep = std::clamp(p.kv_keep, 0.05f, 1.0f);
  p.context_length = std::max(p.context_length, 0);
  if (auto t = s.setting(kKTypeKey); t && kv_type_from_name(*t)) kv.k_type = *t;
  if (auto t = s.setting(kVTypeKey); t && kv_type_from_name(*t)) kv.v_type = *t;
  vm_.ui.chat_templates = chat_template_names();
  vm_.ui.block_sizes.assign(kKvBlockSizes.begin(), kKvBlockSizes.end());
  if (auto t = s.setting(kChatTemplateKey); t && (t->empty() || is_chat_template_name(*t))) vm_.ui.chat_template = *t;
  vm_.presets.clear();
  for (const store::Preset& preset : s.list_presets()) vm_.presets.push_back({preset.id, preset.name, preset.system_prompt});
  vm_.model.recent.clear();
  for (const store::RecentModel& m : s.recent_models()) vm_.model.recent.push_back(m.path);
}

void Controller::load_layout() {
  store::ConversationStore& s = store();
  int64_t width = 0, height = 0;
  ui::WindowLayout saved;
  read_setting(s, kWindowWidthKey, width);
  read_setting(s, kWindowHeightKey, height);
  read_setting(s, kLeftShareKey, saved.left_share);
  read_setting(s, kRightShareKey, saved.right_share);
  ui::WindowLayout& layout = vm_.ui.layout_prefs;
  layout = ui::WindowLayout{};
  if (in_range(width, kMinWindowSide, kMaxWindowSide)) layout.width = int32_t(width);
  if (in_range(height, kMinWindowSide, kMaxWindowSide)) layout.height = int32_t(height);
  if (in_range(saved.left_share, ui::kMinLeftShare, ui::kMaxLeftShare)) layout.left_share = saved.left_share;
  if (in_range(saved.right_share, ui::kMinRightShare, ui::kMaxRightShare)) layout.right_share = saved.right_share;
  if (auto name = s.setting(kThemeKey); name && ui::theme_from_name(*name)) layout.theme = *ui::theme_from_name(*name);
  float font_size = 0;
  read_setting(s, kFontSizeKey, font_size);
  if (ui::valid_font_size(font_size)) layout.font_size = font_size;
  if (auto name = s.setting(kPanelKey); name && ui::panel_from_name(*name)) {
    vm_.ui.panel = *ui::panel_from_name(*name);
    vm_.ui.panel_requested = true;
  }
}

void Controller::remember_layout(int32_t width, int32_t height) {
  const ui::WindowLayout& layout = vm_.ui.layout_prefs;
  try {
    store().set_setting(kWindowWidthKey, std::to_string(width));
    store().set_setting(kWindowHeightKey, std::to_string(height));
    store().set_setting(kLeftShareKey, std::to_string(layout.left_share));
    store().set_setting(kRightShareKey, std::to_string(layout.right_share));
    store().set_setting(kPanelKey, ui::panel_name(vm_.ui.panel));
    store().set_setting(kThemeKey, ui::theme_name(layout.theme));
    store().set_setting(kFontSizeKey, setting_text(layout.font_size));
  } catch (const Error& e) {
    set_status(std::string("the window's layout was not saved: ") + e.what(), true);
  }
}

void Controller::set_theme(const std::string& name) {
  const std::optional<ui::Theme> theme = ui::theme_from_name(name);
  if (!theme) throw Error("unknown theme '" + name + "' (dark or light)");
  vm_.ui.layout_prefs.theme = *theme;
  store().set_setting(kThemeKey, name);
}

void Controller::set_font_size(const std::string& text) {
  float size = 0;
  try {
    size = std::stof(text);
  } catch (const std::exception&) {
  }
  if (!ui::valid_font_size(size)) {
    throw Error("the font size must be " + setting_text(int(ui::kMinFontSize)) + " to " + setting_text(int(ui::kMaxFontSize)) +
                " pixels, not '" + text + "'");
  }
  vm_.ui.layout_prefs.font_size = size;
  store().set_setting(kFontSizeKey, setting_text(size));
}

bool Controller::apply(const ui::UiAction& a) {
  using ui::ActionKind;
  try {
    switch (a.kind) {
      case ActionKind::NewChat: new_chat(); break;
      case ActionKind::SelectConversation: select(a.id); break;
      case ActionKind::RenameConversation: rename(a.id, a.text); break;
      case ActionKind::DeleteConversation: remove(a.id); break;
      case ActionKind::Search: reload_conversations(); break;
      case ActionKind::Send: send(a.text); break;
      case ActionKind::Stop: stop(); break;
      case ActionKind::Regenerate: regenerate(); break;
      case ActionKind::Variants: regenerate(int32_t(a.id)); break;
      case ActionKind::EditResend: edit_resend(a.id, a.text); break;
      case ActionKind::SwitchBranch: switch_branch(a.id); break;
      case ActionKind::DeleteMessage: delete_message(a.id); break;
      case ActionKind::ContinueAnswer: continue_answer(a.id); break;
      case ActionKind::SetSystemPrompt: set_system_prompt(a.text); break;
      case ActionKind::SetConversationSettings: set_conversation_settings(); break;
      case ActionKind::SavePreset: store().create_preset(a.text, a.text2); load_preferences(); break;
      case ActionKind::ApplyPreset:
        for (const ui::PresetView& p : vm_.presets) {
          if (p.id == a.id) set_system_prompt(p.system_prompt);
        }
        break;
      case ActionKind::DeletePreset: store().delete_preset(a.id); load_preferences(); break;
      case ActionKind::SetSampling:
        save_sampling();
        reload_conversation_settings();
        break;
      case ActionKind::OpenModel:
        open_model(a.text);
        vm_.ui.show_library = false;
        break;
      case ActionKind::CancelModelLoad: cancel_model_load(); break;
      case ActionKind::ReconfigureKv: reconfigure_kv(); break;
      case ActionKind::SetChatTemplate: set_chat_template(a.text); break;
      case ActionKind::ExportConversation: export_conversation(a.text, a.text2); break;
      case ActionKind::ImportConversation: import_conversation(a.text); break;
      case ActionKind::SetTheme: set_theme(a.text); break;
      case ActionKind::ServeHttp: serve_http(a.id != 0); break;
      case ActionKind::ConnectRemote: connect_remote(a.text, a.text2, ""); break;
      case ActionKind::ChooseRemoteModel: connect_remote(vm_.remote.url, vm_.ui.remote_edit.api_key, a.text); break;
      case ActionKind::SetFontSize: set_font_size(a.text); break;
      case ActionKind::RescanLibrary: rescan_library(); break;
      case ActionKind::AddLibraryFolder: add_library_folder(a.text); break;
      case ActionKind::RemoveLibraryFolder: remove_library_folder(a.text); break;
      case ActionKind::ShowInFolder: show_in_folder(a.text); break;
      case ActionKind::BrowseFolder: browse(a.text); break;
      case ActionKind::Quit: quit_ = true; break;
    }
    return true;
  } catch (const Error& e) {
    set_status(std::string(ui::action_name(a.kind)) + ": " + e.what(), true);
    return false;
  }
}

void Controller::apply_all(const ui::UiActions& actions) {
  for (const ui::UiAction& a : actions) apply(a);
}

void Controller::update() {
  for (const Event& e : engine_.poll_events()) {
    try {
      on_event(e);
    } catch (const Error& error) {
      set_status(error.what(), true);
    }
  }
  save_streaming_answers();
  save_ready_kv();
  refresh_remote_models();
  import_loaded_kv();
  const auto now = Clock::now();
  if (vm_.model.state == ui::ModelState::Loading) {
    vm_.model.loading_seconds = std::chrono::duration<double>(now - model_load_started_).count();
  }
  if (now - last_stats_ >= kStatsInterval) {
    last_stats_ = now;
    refresh_stats();
    refresh_serving();
  }
  refresh_prompt_view();
  refresh_library();
}

// ---------------------------------------------------------------------------------------
// Store -> view
// ---------------------------------------------------------------------------------------
void Controller::reload_conversations() {
  vm_.conversations.clear();
  for (const store::Conversation& c : store().list_conversations(vm_.ui.search)) {
    vm_.conversations.push_back({c.id, c.title, live_request_of(c.id).has_value(), c.engine});
  }
}

// The conversation's active branch; empty, with the reason in the status line, when the file's
// damage makes it unreadable (the app still opens, and the other conversations with it).
std::vector<store::Message> Controller::readable_branch(store::ConversationId id) {
  try {
    return store().branch_path(id);
  } catch (const Error& e) {
    set_status(e.what(), true);
    return {};
  }
}

void Controller::reload_chat() {
  ++chat_revision_;
  ui::ChatView& chat = vm_.chat;
  const std::optional<store::Conversation> c = chat.conversation_id ? store().conversation(chat.conversation_id) : std::nullopt;
  chat.messages.clear();
  chat.generating = false;
  if (!c) {
    chat = ui::ChatView{};
    return;
  }
  chat.title = c->title;
  chat.system_prompt = c->system_prompt;
  reload_conversation_settings();
  chat.generating = live_request_of(c->id).has_value();
  const ToolCallFormat answer_format = tool_call_format_of(vm_.model.chat_template_source);
  for (const store::Message& m : readable_branch(c->id)) {
    ui::MessageView v;
    v.id = m.id;
    v.role = ui::MessageRole(int(m.role));
    v.state = ui::MessageState(int(m.status));
    v.text = m.content;
    const std::vector<store::Message> siblings = store().siblings(m.id);
    v.sibling_count = int32_t(siblings.size());
    for (size_t i = 0; i < siblings.size(); ++i) {
      if (siblings[i].id != m.id) continue;
      v.sibling_index = int32_t(i);
      v.prev_sibling = i > 0 ? siblings[i - 1].id : 0;
      v.next_sibling = i + 1 < siblings.size() ? siblings[i + 1].id : 0;
    }
    v.can_continue = can_continue(m);
    add_tool_views(m, answer_format, v);
    if (m.stats) {
      v.stats = ui::answer_stats_text(m.stats->completion_tokens, m.stats->decode_tok_s, m.stats->ttft_ms,
                                      m.stats->finish_reason);
    }
    chat.messages.push_back(std::move(v));
  }
  for (const auto& [id, live] : live_) {
    if (ui::MessageView* v = view_message(live.message)) v->text = live.text;
  }
}

void Controller::select(store::ConversationId id) {
  vm_.chat.conversation_id = id;
  vm_.ui.editing_message = 0;
  vm_.ui.scroll_chat_to_bottom = true;
  reload_chat();
  prefetch_kv(id);
}

// ---------------------------------------------------------------------------------------
// Model and KV settings
// ---------------------------------------------------------------------------------------
EngineSettings Controller::engine_settings(const std::string& model_path) const {
  const ui::KvSettingsEdit& kv = vm_.ui.kv_edit;
  EngineSettings s;
  s.model_path = model_path;
  s.threads = options_.threads;
  s.backend = options_.backend;
  s.kv.k_type = kv_type_or_throw(kv.k_type);
  s.kv.v_type = kv_type_or_throw(kv.v_type);
  s.kv.block_size = kv.block_size;
  s.kv.num_blocks = options_.kv_blocks;
  s.kv_budget_bytes = uint64_t(kv.budget_mib) * kMiB;
  s.prefix_caching = kv.prefix_caching;
  s.scheduler.host_tier_bytes = uint64_t(options_.host_tier_mib >= 0 ? options_.host_tier_mib : kv.host_tier_mib) * kMiB;
  s.chat_template = vm_.ui.chat_template;
  return s;
}

void Controller::set_chat_template(const std::string& name) {
  if (!name.empty() && !is_chat_template_name(name)) throw Error("unknown chat template '" + name + "'");
  vm_.ui.chat_template = name;
  store().set_setting(kChatTemplateKey, name);
  engine_.local().set_chat_template(name);
  if (engine_.is_remote()) set_status("the chat template applies to the in-process engine; the server renders prompts with its own", false);
}

void Controller::open_model(const std::string& path) {
  if (const std::string problem = model_file_problem(path); !problem.empty()) throw Error(problem);
  if (engine_.is_remote()) use_local_engine();
  engine_.local().load_model(engine_settings(path));
  show_loading(path);
}

void Controller::show_loading(const std::string& what) {
  ui::ModelView loading;
  loading.state = ui::ModelState::Loading;
  loading.path = what;
  loading.recent = vm_.model.recent;
  vm_.model = std::move(loading);
  vm_.kv = ui::KvView{};
  vm_.kv_types.clear();
  forget_kv_quality();
  model_load_started_ = Clock::now();
}

// The in-process engine's model or KV pool is ready, or a remote server answered.
void Controller::on_model_loaded(const std::string& note) {
  last_stats_steps_ = 0;
  vm_.kv_types.clear();
  kv_in_pool_.clear();   // a new pool parks nothing yet, and holds no import made before it
  std::erase_if(kv_imports_, [this](const auto& import) { return !live_request_of(import.first); });
  if (reconfiguring_) {
    reconfiguring_ = false;
    set_status("KV pool re-created", false);
  } else if (engine_.is_remote()) {
    vm_.model.state = ui::ModelState::Loaded;
    fill_model_view(engine_.chat().stats().model, vm_.model);
    forget_kv_quality();
    set_status(note, false);
  } else {
    vm_.model.state = ui::ModelState::Loaded;
    store().note_model_opened(vm_.model.path);
    load_preferences();
    set_status(note.empty() ? "model loaded" : "model loaded; " + note, false);
    start_kv_quality();
  }
  prefetch_kv(vm_.chat.conversation_id);
}

void Controller::reconfigure_kv() {
  if (engine_.is_remote()) {
    throw Error("the KV pool is the server's (" + vm_.remote.url + "): KV types, block size and budget apply to the "
                "in-process engine; open a model to use them");
  }
  EngineSettings s = engine_settings(vm_.model.path);
  if (s.kv_budget_bytes > 0) s.kv.num_blocks = 0;   // a budget set here wins over --kv-blocks
  engine_.local().reconfigure_kv(s.kv, s.kv_budget_bytes, s.prefix_caching, s.scheduler.host_tier_bytes);
  reconfiguring_ = true;
  const ui::KvSettingsEdit& kv = vm_.ui.kv_edit;
  store().set_setting(kKTypeKey, kv.k_type);
  store().set_setting(kVTypeKey, kv.v_type);
  for_each_kv_setting(vm_.ui.kv_edit, [&](const char* key, auto value) { store().set_setting(key, setting_text(value)); });
  set_status("re-creating the KV pool (" + kv.k_type + "/" + kv.v_type + ", block " + std::to_string(kv.block_size) + ")",
             false);
}

void Controller::save_sampling() {
  for_each_sampling_setting(vm_.sampling, [&](const char* key, auto value) { store().set_setting(key, setting_text(value)); });
}

// ---------------------------------------------------------------------------------------
// Statistics -> KV panels
// ---------------------------------------------------------------------------------------
void Controller::refresh_stats() {
  const EngineStats stats = engine_.chat().stats();
  const auto now = Clock::now();
  if (now - last_plot_sample_ >= kPlotInterval) {
    last_plot_sample_ = now;
    sample_plots(stats);
  }
  if (stats.steps == last_stats_steps_ || !stats.model_loaded || vm_.model.state != ui::ModelState::Loaded) return;
  last_stats_steps_ = stats.steps;
  refresh_server_stats(stats);
  std::map<int64_t, std::string> titles;
  for (const ui::ConversationSummary& c : vm_.conversations) titles[c.id] = c.title;
  vm_.kv = make_kv_view(stats.kv, stats.prefix_caching, sequence_owners(stats.owners, titles));
  vm_.kv.valid = stats.kv.blocks_total > 0;   // a remote server that shows no block map has none
  vm_.engine = make_engine_view(stats);
  fill_model_view(stats.model, vm_.model);
  vm_.chat.settings.model_context = vm_.model.context_length;
  if (vm_.kv_types.empty()) vm_.kv_types = kv_type_costs(stats.model, kv_quality_);
  vm_.memory = {stats.model.weight_bytes, stats.activation_bytes, stats.memory_available_bytes};
  vm_.chat.context_used = 0;
  for (const ui::KvSequenceView& s : vm_.kv.sequences) {
    if (s.conversation_id == vm_.chat.conversation_id && s.conversation_id != 0) vm_.chat.context_used = s.num_tokens;
  }
}

void Controller::sample_plots(const EngineStats& stats) {
  ui::TimeSeriesView& t = vm_.plots;
  t.sample_seconds = std::chrono::duration<float>(kPlotInterval).count();
  if (engine_.is_remote()) {
    if (stats.server) sample_server_plots(stats, *stats.server);   // none before it answered
    return;
  }
  ui::push_sample(t.tokens_per_s, float(stats.tokens_per_s), kPlotSamples);
  ui::push_sample(t.blocks_used, float(stats.kv.blocks_used), kPlotSamples);
  ui::push_sample(t.hit_rate, float(stats.kv.prefix_hit_rate * 100.0), kPlotSamples);
}

// A server's plots from its own figures: tokens per second from its generated-token total, blocks
// and hit rate from its block map or its /metrics. A figure it does not expose adds no sample
// (the plot stays empty rather than drawing a line at zero).
void Controller::sample_server_plots(const EngineStats& stats, const ServerStats& server) {
  ui::TimeSeriesView& t = vm_.plots;
  if (server.generation_tokens) {
    if (last_server_generated_) {
      const double per_second = (*server.generation_tokens - *last_server_generated_) / double(t.sample_seconds);
      ui::push_sample(t.tokens_per_s, float(std::max(per_second, 0.0)), kPlotSamples);
    }
    last_server_generated_ = server.generation_tokens;
  }
  if (stats.kv.blocks_total > 0) {
    ui::push_sample(t.blocks_used, float(stats.kv.blocks_used), kPlotSamples);
    ui::push_sample(t.hit_rate, float(stats.kv.prefix_hit_rate * 100.0), kPlotSamples);
    return;
  }
  if (server.kv_usage && server.num_blocks) {
    ui::push_sample(t.blocks_used, float(*server.kv_usage * *server.num_blocks), kPlotSamples);
  }
  if (server.prefix_hit_rate) ui::push_sample(t.hit_rate, float(*server.prefix_hit_rate * 100.0), kPlotSamples);
}

void Controller::set_status(const std::string& message, bool error) {
  vm_.status.message = message;
  vm_.status.message_is_error = error;
}

}  // namespace kvdesk::gui
