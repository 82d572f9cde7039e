// Controller, part 2: conversations, messages and generation. Every user message is
// committed before its request is submitted; the answer exists in the store (Streaming) from
// the start, is saved at least every second while tokens arrive and gets its final text,
// status, statistics and token ids (with the spans of the messages before it) when the engine
// finishes it. The prompt view renders the selected conversation as the model sees it.
#include <random>

#include "app/chat/chat_history.h"
#include "app/gui/controller.h"
#include "app/gui/conversation_settings.h"
#include "app/gui/prompt_view.h"
#include "engine/error.h"

namespace kvdesk::gui {
namespace {

constexpr auto kSaveInterval = std::chrono::seconds(1);

}  // namespace

// ---------------------------------------------------------------------------------------
// Conversations
// ---------------------------------------------------------------------------------------
void Controller::new_chat() {
  const store::ConversationId id = store().create_conversation(store::kNewChatTitle);
  reload_conversations();
  select(id);
}

void Controller::rename(store::ConversationId id, const std::string& title) {
  if (title.empty()) throw Error("a conversation's title cannot be empty");
  store().rename_conversation(id, title);
  reload_conversations();
  if (id == vm_.chat.conversation_id) reload_chat();
}

void Controller::remove(store::ConversationId id) {
  for (RequestId r : live_requests_of(id)) {
    engine_.chat().cancel(r);
    live_.erase(r);
  }
  engine_.local().release_conversation(uint64_t(id));
  forget_kv(id);
  store().delete_conversation(id);
  reload_conversations();
  if (id == vm_.chat.conversation_id) select(vm_.conversations.empty() ? 0 : vm_.conversations.front().id);
  set_status("conversation deleted", false);
}

void Controller::set_conversation_settings() {
  if (vm_.chat.conversation_id == 0) throw Error("select or start a conversation first");
  store().set_conversation_settings(vm_.chat.conversation_id, own_settings(vm_.chat.settings));
  reload_conversation_settings();
}

void Controller::reload_conversation_settings() {
  if (vm_.chat.conversation_id == 0) {
    vm_.chat.settings = ui::ConversationSettingsView{};
    return;
  }
  vm_.chat.settings = resolve_conversation_settings(store().conversation_settings(vm_.chat.conversation_id),
                                                    vm_.sampling, vm_.model.context_length);
  if (!vm_.chat.settings.note.empty()) set_status("conversation settings: " + vm_.chat.settings.note, true);
}

void Controller::set_system_prompt(const std::string& text) {
  if (vm_.chat.conversation_id == 0) throw Error("select or start a conversation first");
  store().set_system_prompt(vm_.chat.conversation_id, text);
  vm_.chat.system_prompt = text;
  ++chat_revision_;
}

// ---------------------------------------------------------------------------------------
// Messages and branches
// ---------------------------------------------------------------------------------------
void Controller::send(const std::string& text) {
  if (vm_.model.state != ui::ModelState::Loaded) throw Error("no model is open: open one first");
  if (text.empty()) throw Error("the message is empty");
  if (vm_.chat.conversation_id == 0) new_chat();
  const store::ConversationId conversation = vm_.chat.conversation_id;
  if (live_request_of(conversation)) throw Error("this conversation is still answering: stop it first");
  const std::optional<store::Conversation> c = store().conversation(conversation);
  if (!c) throw Error("the conversation no longer exists");
  const store::MessageId user =
      store().add_message({.conversation = conversation, .parent = c->active_leaf_id, .role = store::Role::User, .content = text});
  if (!c->active_leaf_id && c->title == store::kNewChatTitle) store().rename_conversation(conversation, store::title_from(text));
  start_answer(conversation, user);
}

void Controller::regenerate(int32_t variants) {
  if (variants < 1 || variants > kMaxSamples) throw Error("variants must be from 1 to " + std::to_string(kMaxSamples));
  if (variants > 1 && engine_.is_remote()) throw Error("variants need the in-process engine; a server answers one at a time here");
  if (vm_.model.state != ui::ModelState::Loaded) throw Error("no model is open: open one first");
  const store::ConversationId conversation = vm_.chat.conversation_id;
  if (conversation == 0 || vm_.chat.messages.empty()) throw Error("nothing to regenerate");
  if (live_request_of(conversation)) throw Error("this conversation is still answering: stop it first");
  const ui::MessageView& last = vm_.chat.messages.back();
  store::MessageId parent = last.id;
  if (last.role == ui::MessageRole::Assistant) {
    const std::optional<store::Message> m = store().message(last.id);
    if (!m || !m->parent_id) throw Error("the last answer has no question to answer again");
    parent = *m->parent_id;
  }
  start_answer(conversation, parent, variants);
}

void Controller::edit_resend(store::MessageId id, const std::string& text) {
  if (vm_.model.state != ui::ModelState::Loaded) throw Error("no model is open: open one first");
  if (text.empty()) throw Error("the message is empty");
  const std::optional<store::Message> m = store().message(id);
  if (!m || m->role != store::Role::User) throw Error("only your own messages can be edited");
  if (live_request_of(m->conversation_id)) throw Error("this conversation is still answering: stop it first");
  const store::MessageId edited = store().add_message(
      {.conversation = m->conversation_id, .parent = m->parent_id, .role = store::Role::User, .content = text});
  start_answer(m->conversation_id, edited);
}

void Controller::switch_branch(store::MessageId id) {
  const std::optional<store::Message> m = store().message(id);
  if (!m) throw Error("that message no longer exists");
  store().set_active_leaf(m->conversation_id, store().newest_leaf_under(id));
  reload_chat();
}

void Controller::stop() {
  const std::vector<RequestId> requests = live_requests_of(vm_.chat.conversation_id);
  if (requests.empty()) throw Error("nothing is being generated here");
  for (RequestId r : requests) engine_.chat().cancel(r);
}

// ---------------------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------------------
void Controller::start_answer(store::ConversationId conversation, store::MessageId parent, int32_t variants) {
  store().set_active_leaf(conversation, parent);
  const std::vector<store::Message> history = store().branch_path(conversation);
  std::vector<store::MessageId> answers;   // [variants]
  for (int32_t i = 0; i < variants; ++i) {
    answers.push_back(store().add_message({.conversation = conversation, .parent = parent, .role = store::Role::Assistant,
                                           .content = "", .status = store::MessageStatus::Streaming}));
  }
  store().set_active_leaf(conversation, answers.front());   // the variant whose KV stays parked
  const std::string kv_source = restore_kv(conversation);
  const std::optional<store::Conversation> c = store().conversation(conversation);
  if (!c) throw Error("the conversation no longer exists");
  const chat::ChatTurn chat = chat::chat_turn(*c, history);
  store().set_conversation_engine(conversation, engine_.label());
  Request request = make_request(conversation, chat);
  request.samples = variants;
  const RequestId id = engine_.chat().submit(request);   // variant i answers as id + i
  if (!chat.damaged.empty()) set_status(chat.damaged.front(), true);
  const bool reasoning = answers_open_in_reasoning();
  for (int32_t i = 0; i < variants; ++i) {
    LiveAnswer& live = live_[id + RequestId(i)];
    live = LiveAnswer{conversation, answers[size_t(i)], "", Clock::now(), kv_source, chat};
    live.opened_in_reasoning = reasoning;
    live.parks_kv = i == 0;
  }
  last_failure_.clear();
  reload_conversations();
  if (conversation == vm_.chat.conversation_id) reload_chat();
  vm_.ui.scroll_chat_to_bottom = true;
}

// Whether the engine's chat template ends its prompts inside the model's <think>, so an answer
// streams as reasoning from its first token.
bool Controller::answers_open_in_reasoning() {
  return engine_.chat().stats().model.chat_template_opens_reasoning;
}

Request Controller::make_request(store::ConversationId conversation, const chat::ChatTurn& chat) {
  Request r;
  chat::set_chat(r, chat);
  const ui::ConversationSettingsView settings =
      resolve_conversation_settings(store().conversation_settings(conversation), vm_.sampling, vm_.model.context_length);
  apply_generation_settings(settings.values, vm_.model.context_length, std::random_device{}(), r);
  r.conversation_key = uint64_t(conversation);
  return r;
}

void Controller::on_event(const Event& e) {
  switch (e.kind) {
    case EventKind::Token: on_token(e.request, e.text); break;
    case EventKind::Finished: on_finished(e.request, e); break;
    case EventKind::Error:
      if (e.request == 0 && e.finish == FinishReason::Cancelled) {
        on_load_cancelled(e.text);
      } else {
        on_error(e.request, e.text);
      }
      break;
    case EventKind::LoadProgress: on_load_progress(e.progress); break;
    case EventKind::Logits: break;   // the app's requests ask for none
    case EventKind::ModelLoaded: on_model_loaded(e.text); break;
    case EventKind::KvQuality: on_kv_quality(e); break;
  }
}

void Controller::on_token(RequestId id, const std::string& text) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  it->second.text += text;
  if (ui::MessageView* v = view_message(it->second.message)) {
    v->text = it->second.text;
    v->opened_in_reasoning = it->second.opened_in_reasoning;
  }
}

void Controller::on_finished(RequestId id, const Event& e) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  const LiveAnswer live = std::move(it->second);
  live_.erase(it);
  const bool cancelled = e.finish == FinishReason::Cancelled;
  store::AnswerStats stats{vm_.model.name, e.metrics.prompt_tokens, live.earlier_tokens + e.metrics.generated_tokens, e.metrics.ttft_ms,
                           e.metrics.decode_tok_s, cancelled ? "user" : finish_reason_name(e.finish)};
  store().finish_message(live.message, live.text,
                         cancelled ? store::MessageStatus::Stopped : store::MessageStatus::Complete, stats);
  save_answer_tokens(live, e.chat_tokens);
  std::string kv_source = live.kv_source;
  if (live.parks_kv) {
    kv_source = resolve_kv_source(live.conversation, live.kv_source);
    request_kv_save(live.conversation);
  }
  if (e.metrics.host_tier_tokens > 0) kv_source = "host tier";
  char buf[320];
  std::snprintf(buf, sizeof buf, "TTFT %.0f ms, %.1f tok/s (%d tokens, %d of %d prompt tokens cached; KV from %s)",
                e.metrics.ttft_ms, e.metrics.decode_tok_s, e.metrics.generated_tokens, e.metrics.cached_tokens,
                e.metrics.prompt_tokens, kv_source.c_str());
  vm_.status.last_answer = buf;
  reload_conversations();
  if (live.conversation == vm_.chat.conversation_id) {
    reload_chat();
    vm_.ui.scroll_chat_to_bottom = true;   // the answer's statistics and Regenerate below it
  }
}

void Controller::on_error(RequestId id, const std::string& message) {
  const auto it = live_.find(id);
  if (id == 0 || it == live_.end()) {
    if (id == 0 && vm_.model.state == ui::ModelState::Loading) {
      vm_.model.state = ui::ModelState::Failed;
      vm_.model.error = message;
    }
    reconfiguring_ = false;
    set_status(message, true);
    return;
  }
  const LiveAnswer live = std::move(it->second);
  live_.erase(it);
  kv_imports_.erase(live.conversation);
  store::AnswerStats stats;
  stats.model = vm_.model.name;
  stats.finish_reason = "error";
  store().finish_message(live.message, live.text, store::MessageStatus::Failed, stats);
  last_failure_ = message;
  set_status("generation failed: " + message, true);
  reload_conversations();
  if (live.conversation == vm_.chat.conversation_id) reload_chat();
}

void Controller::save_streaming_answers() {
  const auto now = Clock::now();
  for (auto& [id, live] : live_) {
    if (now - live.last_save < kSaveInterval) continue;
    live.last_save = now;
    try {
      store().update_message(live.message, live.text, store::MessageStatus::Streaming);
    } catch (const Error& e) {
      set_status(std::string("saving the answer failed: ") + e.what(), true);
    }
  }
}

// ---------------------------------------------------------------------------------------
// The prompt as the model sees it
// ---------------------------------------------------------------------------------------
void Controller::refresh_prompt_view() {
  if (!vm_.ui.show_prompt) return;
  const ui::ModelView& m = vm_.model;
  PromptViewKey key{vm_.chat.conversation_id, chat_revision_, m.state, m.backend, m.chat_template,
                    m.chat_template_source, m.bos_text, m.eos_text};
  if (key == prompt_key_) return;
  prompt_key_ = std::move(key);
  try {
    vm_.chat.prompt = prompt_view_of(vm_.chat.conversation_id);
  } catch (const Error& e) {
    vm_.chat.prompt = ui::PromptView{};
    vm_.chat.prompt.error = e.what();
  }
}

// The conversation's messages, as its requests submit them, rendered.
ui::PromptView Controller::prompt_view_of(store::ConversationId id) {
  const std::optional<store::Conversation> c = id ? store().conversation(id) : std::nullopt;
  ui::PromptView view;
  if (!c) {
    view.note = "Select or start a conversation to see its prompt.";
    return view;
  }
  const chat::ChatTurn turn = chat::chat_turn(*c, readable_branch(id));
  view = render_prompt_view(vm_.model, turn.messages, template_date(turn.started));
  view.conversation_id = id;
  return view;
}

ui::MessageView* Controller::view_message(store::MessageId id) {
  for (ui::MessageView& m : vm_.chat.messages) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

std::optional<RequestId> Controller::live_request_of(store::ConversationId conversation) const {
  for (const auto& [id, live] : live_) {
    if (live.conversation == conversation) return id;
  }
  return std::nullopt;
}

std::vector<RequestId> Controller::live_requests_of(store::ConversationId conversation) const {
  std::vector<RequestId> ids;
  for (const auto& [id, live] : live_) {
    if (live.conversation == conversation) ids.push_back(id);
  }
  return ids;
}

}  // namespace kvdesk::gui
