// Engine: the in-process inference server. It owns the model, the paged KV cache and the
// scheduler, and runs them on its own thread. Every public call only posts a command and
// returns at once (no call waits for a model step); results come back as Events, drained by
// poll_events(), and a wake-up callback tells the UI thread there is something to drain.
//
//   UI thread: submit() -> inbox -> engine thread: EngineCore::step() = plan -> forward ->
//   sample -> events -> outbox -> wake() -> UI thread: poll_events()
#pragma once
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

// The chat template families requests can be rendered with (names for set_chat_template).
std::vector<std::string> chat_template_names();
bool is_chat_template_name(const std::string& name);
// The built-in text KV quality is measured on, as KvQuality::text_id names it.
const char* kv_quality_text_id(int32_t head_dim);

// What a front end drives to chat: the in-process Engine below, or a remote OpenAI-compatible
// server (app/remote/remote_engine.h) whose answers and statistics come back as the same
// Events and EngineStats. Every call returns at once; results arrive through poll_events().
class EngineClient {
 public:
  virtual ~EngineClient() = default;
  // Returns the request's id at once. Bad input ends it with an Error event.
  virtual RequestId submit(Request request) = 0;
  virtual void cancel(RequestId request) = 0;
  virtual std::vector<Event> poll_events() = 0;
  virtual EngineStats stats() const = 0;
  // Blocks until no request is running or waiting (true) or the timeout passes (false).
  virtual bool wait_idle(std::chrono::milliseconds timeout) = 0;
  // The loaded model's vocabulary (llama-server's /tokenize and /detokenize): the ids of text,
  // BOS first when add_special and the vocabulary asks for it, control tokens' text taken as
  // those tokens when parse_special; and what ids print, control tokens' text included. The
  // future throws kvdesk::Error without a model, for an id out of range, or where the engine
  // has no vocabulary of its own (a remote one).
  virtual std::future<std::vector<int32_t>> tokenize(std::string text, bool add_special, bool parse_special) = 0;
  virtual std::future<std::string> detokenize(std::vector<int32_t> ids) = 0;
};

class Engine final : public EngineClient {
 public:
  // wake is called on the engine thread whenever events are ready (e.g. glfwPostEmptyEvent).
  explicit Engine(std::function<void()> wake = {});
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads (or replaces) the model; LoadProgress events, then ModelLoaded or Error (request 0)
  // follow. Requests in flight on a replaced model end with an Error event. The old model is
  // released before the new one is read, so two models never need memory at once: a load that
  // fails or is cancelled leaves no model loaded.
  void load_model(const EngineSettings& settings);
  // Cancels the loads posted so far that have not finished: each ends with an Error event
  // (request 0, finish Cancelled, "the model load was cancelled") and leaves no model loaded.
  // Safe from any thread (the wake callback included); a load that already finished is kept.
  void cancel_load();
  // Re-creates the KV pool and the host tier with new KV settings on the loaded model; live
  // requests carry on (their sequences are re-prefilled). ModelLoaded follows.
  void reconfigure_kv(const KvLayout& kv, size_t kv_budget_bytes, bool prefix_caching, size_t host_tier_bytes);
  // Renders requests submitted from now on with this chat template (a chat_template_names() one, ""
  // for the model's own), for this model and the ones loaded later. An unknown name ends in
  // an Error event (request 0).
  void set_chat_template(const std::string& name);
  // Measures what each of `types` costs the loaded model (KvQuality, against f32 KV) in the
  // background: one forward step at a time, only while no request has work, so a request
  // waits on at most one step of it. One KvQuality event per type, in order, as each is done;
  // a failure ends it with one KvQuality event whose text says why. Replaces a measurement in
  // progress; a model load or an unload abandons it. Without a model it does nothing.
  void measure_kv_quality(std::vector<KvType> types);

  RequestId submit(Request request) override;
  void cancel(RequestId request) override;
  // A new request that shares everything the source has so far (its KV blocks included)
  // and continues it with other sampling settings: n > 1 samples, alternative answers.
  RequestId fork(RequestId source, const SamplingParams& sampling, int32_t max_tokens);
  // Forgets a parked conversation's sequence (e.g. the conversation was deleted).
  void release_conversation(uint64_t conversation_key);

  // The conversation's parked KV as bytes, with the identity they are valid for (see
  // ConversationKv); nullopt when the conversation has none parked (or no model is loaded).
  // Runs on the engine thread between steps: the future is ready within one step.
  std::future<std::optional<ConversationKv>> export_conversation(uint64_t conversation_key);
  // Parks kv as the conversation's turn, so its next turn prefills only its new tokens. The
  // future holds "" when adopted, else why not (another model, KV type, block size or chat
  // template; the pool is full); the caller then simply recomputes.
  std::future<std::string> import_conversation(uint64_t conversation_key, ConversationKv kv);

  std::vector<Event> poll_events() override;
  // The latest statistics snapshot (published at least 5 times a second while busy).
  EngineStats stats() const override;
  bool wait_idle(std::chrono::milliseconds timeout) override;
  std::future<std::vector<int32_t>> tokenize(std::string text, bool add_special, bool parse_special) override;
  std::future<std::string> detokenize(std::vector<int32_t> ids) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvdesk
