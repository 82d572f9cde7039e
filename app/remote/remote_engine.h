// RemoteEngine: an OpenAI-compatible server (vLLM, SGLang, llama-server, kvdesk serve) driven
// as an EngineClient, for models too big for this machine. Requests go out as streamed
// /v1/chat/completions (messages) or /v1/completions (prompt_text); the streamed text comes back
// as Token events and the usage as the Finished event's metrics (time to first token and
// inter-token latency measured here, as a user sees them). A statistics thread reads the
// server's /metrics (and kvdesk serve's /v1/kv, which carries its whole block map) so the KV
// panels show the server's cache. http:// only; loopback or the user's own network.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace kvdesk::remote {

struct RemoteOptions {
  explicit RemoteOptions(std::string server_url = {}, std::string key = {})
      : url(std::move(server_url)), api_key(std::move(key)) {}

  std::string url;        // "http://host:port"
  std::string api_key;    // sent as "Authorization: Bearer KEY" when set
  std::string model;      // empty: the first model the server lists
  std::chrono::milliseconds stats_interval{500};
};

class RemoteEngine final : public EngineClient {
 public:
  // Connects at once on its own thread: ModelLoaded (the server's model) or Error follows.
  // wake is called whenever events are ready.
  explicit RemoteEngine(RemoteOptions options, std::function<void()> wake = {});
  ~RemoteEngine() override;   // cancels what is in flight and waits for its threads
  RemoteEngine(const RemoteEngine&) = delete;
  RemoteEngine& operator=(const RemoteEngine&) = delete;

  RequestId submit(Request request) override;
  void cancel(RequestId request) override;
  std::vector<Event> poll_events() override;
  EngineStats stats() const override;
  bool wait_idle(std::chrono::milliseconds timeout) override;
  // The remote server's vocabulary is its own business: both refuse (kvdesk::Error).
  std::future<std::vector<int32_t>> tokenize(std::string text, bool add_special, bool parse_special) override;
  std::future<std::string> detokenize(std::vector<int32_t> ids) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvdesk::remote
