// Replayer: plays a chat trace in real time, as users would, through the in-process Engine or a
// remote OpenAI-compatible server (the same workload for both), and reports per-turn and
// summary figures (the replay JSON of kvdesk-cli and kvdesk-bench trace). Turns go the app's
// way: the history's messages with their token spans, so a regenerate or an edit forks the
// parked turn exactly where the app's would; the KV's copy-on-write copies and forks are
// reported per turn and in total.
#pragma once
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "app/remote/remote_engine.h"
#include "app/replay/trace.h"
#include "engine/engine.h"

namespace kvdesk {

struct TurnResult {
  std::string conversation;
  size_t turn = 0;
  TurnKind kind = TurnKind::Send;
  RequestMetrics metrics;
  // The KV pool's copy-on-write copies and forks from the turn's submission to its end: the
  // engine's counters, so turns running at the same time count each other's too.
  uint64_t cow_copies = 0;
  uint64_t forks = 0;
  std::vector<int32_t> tokens;
  std::string text;
};

struct ReplaySummary {
  double wall_ms = 0;
  double requests_per_s = 0;
  double output_tok_s = 0;
  double ttft_p50_ms = 0;
  double ttft_p95_ms = 0;
  double itl_p50_ms = 0;           // median over turns of each turn's median inter-token latency
  double itl_p95_ms = 0;
  int32_t peak_kv_blocks = 0;
  int64_t retention_tokens_seen = 0;    // over live sequences as the replay ended
  int64_t retention_tokens_kept = 0;
  uint64_t retention_blocks_freed = 0;
  double prefix_hit_rate = 0;
  uint64_t preemptions = 0;
  uint64_t swapped_bytes = 0;
  uint64_t host_tier_hits = 0;     // turns that continued from the host tier
  uint64_t host_tier_drops = 0;
  uint64_t cow_copies = 0;         // over the whole replay
  uint64_t forks = 0;
};

class Replayer {
 public:
  // retention: the KV retention every turn's request runs with (off by default).
  explicit Replayer(std::vector<TraceConversation> trace, const RetentionOptions& retention = {});

  // Loads the model, replays every turn, returns when the last answer ends. stop, when set
  // to true by another thread (Ctrl-C), ends the replay early with what was measured.
  void run(const EngineSettings& settings, const std::atomic<bool>* stop = nullptr);
  // The same against a server (its model, its KV cache).
  void run(const remote::RemoteOptions& server, const std::atomic<bool>* stop = nullptr);

  const std::vector<TurnResult>& results() const { return results_; }
  ReplaySummary summary() const;
  nlohmann::json report_json() const;

 private:
  // A conversation's current branch. Invariant: history and spans have the same length.
  struct Conversation {
    const TraceConversation* trace;
    std::vector<ChatMessage> history;
    std::vector<MessageTokens> spans;   // what the engine reported for each history message
    size_t next_turn = 0;
    double ready_at_ms = 0;
    RequestId in_flight = 0;
  };

  void play(EngineClient& engine, const std::atomic<bool>* stop);
  void wake();
  double elapsed_ms() const;
  bool done() const;
  void submit_ready(EngineClient& engine);
  static void branch(Conversation& c, const TraceTurn& t);
  void handle(const std::vector<Event>& events);
  void finish_turn(Conversation& c, TurnResult& r, const Event& finished);

  std::vector<TraceConversation> trace_;
  RetentionOptions retention_;
  std::vector<Conversation> conversations_;
  std::vector<TurnResult> results_;
  std::map<RequestId, size_t> conversation_of_;
  std::map<RequestId, size_t> result_of_;
  std::chrono::steady_clock::time_point start_;
  double wall_ms_ = 0;
  int32_t peak_blocks_ = 0;
  EngineStats last_stats_;
  KvSnapshot first_kv_;   // the pool's counters as the replay started
  std::mutex mutex_;
  std::condition_variable wake_cv_;
  bool woken_ = false;
};

// Waits for the engine's ModelLoaded event; throws kvdesk::Error with the load error.
void wait_for_model(EngineClient& engine);

}  // namespace kvdesk
