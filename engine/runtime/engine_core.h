// EngineCore: the one engine step every front end runs. step() = the scheduler's plan ->
// the forward backend over every planned token -> one sample per sequence that reached the end
// of its tokens -> Token / Logits / Finished events. The request rules live here and only
// here: end-of-generation tokens, max tokens, the context limit (stop, or the sink window),
// UTF-8 streaming, and the per-request metrics (TTFT, prefill and decode tok/s, inter-token
// latency). The threaded Engine (engine/engine.h) steps it on its own thread; the CLI, the
// bench and the lab step it on the caller's thread (engine/runtime/sync_driver.h). No locks: one
// thread owns a core.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_types.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/runtime/sampler.h"
#include "engine/sched/scheduler.h"

namespace kvdesk {

class ForwardBackend;
class KvCache;
class Model;

class EngineCore {
 public:
  using Clock = std::chrono::steady_clock;

  // forward runs over kv, which was made with forward.kv_pool().
  EngineCore(Model& model, ForwardBackend& forward, KvCache& kv, const SchedulerLimits& limits);
  ~EngineCore();

  // Queues a request whose prompt is already tokenized. Throws kvdesk::Error when it can
  // never run (empty, longer than the model's context under the Stop policy or than the whole
  // pool, or asking for no token without asking for logits).
  void add(RequestId id, const Request& request, std::vector<int32_t> prompt, Clock::time_point submitted);
  // Ends the request with Finished (Cancelled); false when it is unknown (already finished).
  bool cancel(RequestId id, std::vector<Event>& events);
  // A new request continuing everything the source has so far (its KV blocks shared while it
  // runs) with other sampling settings; false when the source is unknown.
  bool fork(RequestId source, RequestId id, const SamplingParams& sampling, int32_t max_tokens);
  void release_conversation(uint64_t key) { scheduler_.release_conversation(key); }
  // The conversation's newest parked turn as tokens and bytes (identity left to the caller),
  // from the pool or the host tier; nullopt when none is parked or retention has compacted it.
  std::optional<ConversationKv> export_conversation(uint64_t key) const;
  // Parks kv's tokens and blocks as the conversation's newest turn; false, and no change, when
  // the bytes do not match the tokens or the pool cannot hold them now.
  bool import_conversation(uint64_t key, const ConversationKv& kv);
  // Frees every sequence (the KV pool is about to be re-created); live requests are prefilled
  // again into the new pool, set with set_kv_cache().
  void detach_all_sequences() { scheduler_.detach_all_sequences(); }
  void set_kv_cache(KvCache& kv);
  void set_host_tier_budget(size_t bytes) { scheduler_.set_host_tier_budget(bytes); }
  // Ends every request with an Error event.
  void fail_all(const std::string& message, std::vector<Event>& events);

  bool has_work() const { return scheduler_.has_work(); }
  // One step; returns the tokens whose KV it computed (0 only when nothing could run).
  int32_t step(std::vector<Event>& events);

  const Scheduler& scheduler() const { return scheduler_; }
  uint64_t generated_tokens() const { return generated_tokens_; }

 private:
  struct Live;

  void run_forward(const StepPlan& plan, std::vector<Event>& events);
  std::unique_ptr<Live> make_live(RequestId id, const Request& request, const SamplingParams& sampling);
  std::vector<RequestId> fork_samples(Live& live);   // the ids forked
  void sample(Live& live, const float* last_row, std::vector<Event>& events);
  void advance_grammar(Live& live, int32_t token);
  void end_unforked_samples(const Live& live, std::vector<Event>& events, const std::string& error);
  const std::shared_ptr<const grammar::TokenTable>& token_table(bool print_control_tokens);
  void keep_grammar_tables(Live& live);
  void reuse_grammar_tables(grammar::GrammarMatcher& matcher, const grammar::Grammar& grammar, bool print_control_tokens);
  void emit_prompt_logits(const ScheduledChunk& chunk, const Live& live, const float* rows, std::vector<Event>& events);
  void after_chunk(const ScheduledChunk& chunk, const float* last_row, std::vector<Event>& events);
  void accept_token(Live& live, int32_t token, const SampleReport* report, std::vector<Event>& events);
  void finish(Live& live, FinishReason reason, std::vector<Event>& events);
  void fail(Live& live, const std::string& message, std::vector<Event>& events);
  void slide_window(Live& live);
  // The tokens the request's sequence may hold: its context_limit within the model's context.
  int32_t context_of(const Request& request) const;

  Model& model_;
  ForwardBackend& forward_;
  KvCache* kv_;
  Scheduler scheduler_;
  std::map<RequestId, std::unique_ptr<Live>> live_;
  uint64_t generated_tokens_ = 0;
  std::vector<float> logits_;   // [rows][vocab] of the last forward pass
  // The vocabulary as grammars see it, built on first use: [0] control tokens silent, [1] printed.
  std::shared_ptr<const grammar::TokenTable> token_tables_[2];
  // Finished requests' grammar tables (GrammarMatcher::take_tables), least recently finished
  // first: agents send the same schema or tools with every request, and a request with the
  // same rules starts from its predecessor's states and masks instead of from nothing.
  struct KeptGrammar {
    bool print_control_tokens = false;
    grammar::GrammarMatcher::Tables tables;
  };
  static constexpr size_t kKeptGrammars = 8;
  static constexpr size_t kKeptGrammarBytes = size_t{32} << 20;
  std::vector<KeptGrammar> kept_grammars_;
};

}  // namespace kvdesk
