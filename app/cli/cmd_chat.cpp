// kvdesk-cli chat: one turn of a stored conversation, exactly as the app takes it: the user
// message is committed, the active branch is rendered as messages with their stored token ids
// (app/chat/chat_history.h) and submitted to the threaded Engine with conversation_key = the
// conversation's id, and the answer is stored with the token spans the engine reports, so the
// next turn is token-exact with the KV. The conversation's saved KV is imported before the turn
// (a refusal is reported, and the turn recomputes) and its KV is exported and saved after it,
// within the store's cap on saved KV. Prints the answer as it streams, or one JSON object with
// --json.
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "app/chat/chat_history.h"
#include "app/chat/saved_kv.h"
#include "app/cli/cli_common.h"
#include "app/replay/metrics_json.h"
#include "app/replay/replayer.h"
#include "app/store/conversation_store.h"
#include "engine/engine.h"

namespace kvdesk::cli {
namespace {

using namespace kvdesk::store;

struct ChatArgs {
  ModelArgs model;
  std::string db_path = default_database_path().string();
  bool new_conversation = false;
  int64_t conversation_id = 0;
  std::string prompt;
  int max_tokens = 256;
  SamplingArgs sampling;
  ChatTemplateArgs chat_template;   // neither: the model's own
  bool json = false;
};

// Wakes the waiting thread when the engine has posted events.
class EventSignal {
 public:
  void ring() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      rung_ = true;
    }
    cv_.notify_one();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return rung_; });
    rung_ = false;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool rung_ = false;
};

// How the turn went, for the report.
struct TurnOutcome {
  std::string text;
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::Stop;
  RequestMetrics metrics;
  ChatTokens chat_tokens;   // the spans of the turn's messages and the answer's ids
  std::string error;        // non-empty: the engine failed the request
};

// The conversation the turn continues: a new one titled after the prompt, or --conversation.
ConversationId choose_conversation(ConversationStore& store, const ChatArgs& a) {
  if (a.new_conversation) return store.create_conversation(store::title_from(a.prompt));
  return a.conversation_id;
}

// The turn's prompt as the next message of the conversation's active branch; a conversation
// made for it is deleted again when the message cannot be stored (a damaged database).
MessageId add_user_message(ConversationStore& store, ConversationId id, const ChatArgs& a) {
  try {
    const std::optional<Conversation> c = store.conversation(id);
    return store.add_message({.conversation = id, .parent = c->active_leaf_id, .role = Role::User, .content = a.prompt});
  } catch (const Error&) {
    if (a.new_conversation) store.delete_conversation(id);
    throw;
  }
}

// Imports the conversation's saved KV; returns where the turn's KV comes from.
std::string restore_kv(Engine& engine, ConversationStore& store, ConversationId id) {
  chat::SavedKv saved = chat::load_saved_kv(store, id);
  if (!saved.kv) return "recomputed (" + saved.why_not + ")";
  const std::string refused = engine.import_conversation(uint64_t(id), std::move(*saved.kv)).get();
  return refused.empty() ? "database" : "recomputed (" + refused + ")";
}

TurnOutcome run_turn(Engine& engine, EventSignal& signal, const Request& request, bool stream) {
  const RequestId id = engine.submit(request);
  TurnOutcome out;
  for (;;) {
    for (const Event& e : engine.poll_events()) {
      if (e.request != id) continue;
      if (e.kind == EventKind::Token) {
        out.text += e.text;
        if (e.token >= 0) out.tokens.push_back(e.token);
        if (stream) {
          std::fwrite(e.text.data(), 1, e.text.size(), stdout);
          std::fflush(stdout);
        }
      } else if (e.kind == EventKind::Finished) {
        out.finish = e.finish;
        out.metrics = e.metrics;
        out.chat_tokens = e.chat_tokens;
        return out;
      } else if (e.kind == EventKind::Error) {
        out.error = e.text;
        return out;
      }
    }
    signal.wait();
  }
}

Request make_request(const chat::ChatTurn& turn, ConversationId id, const ChatArgs& a) {
  Request r;
  chat::set_chat(r, turn);
  r.sampling = a.sampling.params;
  r.max_tokens = a.max_tokens;
  r.conversation_key = uint64_t(id);
  return r;
}

// The engine's KV of the finished turn, saved in the store; a line saying what happened.
std::string save_kv(Engine& engine, ConversationStore& store, ConversationId id, KvSaveResult& result) {
  const std::optional<ConversationKv> kv = engine.export_conversation(uint64_t(id)).get();
  if (!kv) return "the engine holds no KV for the conversation";
  try {
    result = chat::save_conversation_kv(store, id, *kv);
  } catch (const Error& e) {
    return std::string("saving the KV failed: ") + e.what();
  }
  if (!result.saved) return "not saved: larger than the saved-KV cap on its own";
  return "saved";
}

int run_chat(ChatArgs& a) {
  resolve_sampling(a.sampling);
  if (a.new_conversation == (a.conversation_id != 0)) throw UsageError("give one of --new and --conversation ID");
  ConversationStore store = ConversationStore::open(a.db_path);
  if (!a.new_conversation && !store.conversation(a.conversation_id)) {
    throw Error(store.path() + ": conversation " + std::to_string(a.conversation_id) + " does not exist");
  }
  EventSignal signal;
  Engine engine([&signal] { signal.ring(); });
  engine.load_model(engine_settings(a.model, a.chat_template));
  wait_for_model(engine);

  const ConversationId id = choose_conversation(store, a);
  const MessageId user = add_user_message(store, id, a);
  const std::string restored_from = restore_kv(engine, store, id);
  const chat::ChatTurn chat = chat::chat_turn(*store.conversation(id), store.branch_path(id));
  for (const std::string& line : chat.damaged) std::fprintf(stderr, "%s\n", line.c_str());
  const Request request = make_request(chat, id, a);
  const MessageId answer = store.add_message(
      {.conversation = id, .parent = user, .role = Role::Assistant, .content = "", .status = MessageStatus::Streaming});
  const TurnOutcome turn = run_turn(engine, signal, request, !a.json);
  const std::string kv_source = turn.metrics.host_tier_tokens > 0 ? "host tier" : restored_from;
  const std::string model_name = std::filesystem::path(a.model.model_path).filename().string();
  if (!turn.error.empty()) {
    store.finish_message(answer, turn.text, MessageStatus::Failed, AnswerStats{.model = model_name, .finish_reason = "error"});
    throw Error("generation failed: " + turn.error);
  }
  store.finish_message(answer, turn.text, MessageStatus::Complete,
                       AnswerStats{model_name, turn.metrics.prompt_tokens, turn.metrics.generated_tokens,
                                   turn.metrics.ttft_ms, turn.metrics.decode_tok_s, finish_reason_name(turn.finish)});
  chat::save_chat_tokens(store, chat, answer, turn.chat_tokens);
  KvSaveResult saved;
  const std::string kv_saved = save_kv(engine, store, id, saved);

  if (a.json) {
    nlohmann::json j = metrics_json(turn.metrics);
    j["conversation_id"] = id;
    j["user_message_id"] = user;
    j["answer_message_id"] = answer;
    j["text"] = turn.text;
    j["tokens"] = turn.tokens;
    j["finish_reason"] = finish_reason_name(turn.finish);
    j["kv_source"] = kv_source;
    j["kv_saved"] = kv_saved;
    j["kv_stored_bytes"] = saved.stored_bytes;
    j["kv_dropped_conversations"] = saved.dropped;
    j["messages_from_token_ids"] = turn.chat_tokens.reused_messages;
    j["token_ids_damaged"] = chat.damaged;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "[conversation %lld: %d prompt tokens (%d cached; KV source: %s), %d generated, ttft %.1f ms; KV %s]\n",
                 static_cast<long long>(id), turn.metrics.prompt_tokens, turn.metrics.cached_tokens, kv_source.c_str(),
                 turn.metrics.generated_tokens, turn.metrics.ttft_ms, kv_saved.c_str());
  }
  return 0;
}

}  // namespace

Command add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "Continue a stored conversation (or start one) by one turn, as the app does");
  add_model_options(cmd, args->model);
  add_kv_options(cmd, args->model);
  cmd->add_option("--db", args->db_path, "Conversation database")->capture_default_str();
  CLI::Option* fresh = cmd->add_flag("--new", args->new_conversation, "Start a new conversation");
  CLI::Option* existing = cmd->add_option("--conversation", args->conversation_id, "Continue this conversation");
  fresh->excludes(existing);
  cmd->add_option("-p,--prompt", args->prompt, "The user message")->required();
  cmd->add_option("-n,--max-tokens", args->max_tokens, "Most tokens in the answer")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  add_sampling_options(cmd, args->sampling);
  add_chat_template_options(cmd, args->chat_template);
  cmd->add_flag("--json", args->json, "Print one JSON object with the answer, timings and where the KV came from");
  return Command{cmd, [args] { return run_chat(*args); }};
}

}  // namespace kvdesk::cli
