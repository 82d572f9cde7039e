// Scheduler: continuous batching over the paged KV cache. Every request is a token list
// (prompt + what it generated) and a count of tokens whose KV is computed; there is no
// prefill phase vs decode phase (vLLM v1's idea). One step:
//   1. swapped-out sequences come back when the pool has room;
//   2. every running sequence gets its next tokens within a per-step token budget: one token
//      for those generating (so streams never stall), then prefill chunks, then new requests
//      (admitted with their cached prefix: a parked turn or the prefix cache);
//   3. their KV slots are appended; when the pool runs dry, parked conversations are released,
//      then the lowest-priority, newest running sequence is preempted (recompute or swap);
//   4. one forward pass over all scheduled tokens, one sample per sequence that reached the
//      end of its tokens, and Token / Finished events.
// Runs on the engine thread only.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine_types.h"
#include "engine/backend/forward_backend.h"
#include "engine/kv/kv_cache.h"
#include "engine/runtime/sampler.h"
#include "engine/tokenizer/utf8_stream.h"

namespace kvdesk {

class Model;
class ThreadPool;

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // The CPU forward pass on pool.
  Scheduler(Model& model, KvCache& kv, ThreadPool& pool, const SchedulerLimits& limits);
  // The given backend's forward pass; every KvCache given it made with its kv_pool().
  Scheduler(Model& model, KvCache& kv, ForwardBackend& forward, const SchedulerLimits& limits);
  ~Scheduler();

  // Queues a request whose prompt is already tokenized. Throws kvdesk::Error when it can
  // never run (longer than the whole pool or the model's context under the Stop policy).
  void add(RequestId id, const Request& request, std::vector<int32_t> prompt, Clock::time_point submitted);
  // Returns false when the request is unknown (already finished).
  bool cancel(RequestId id, std::vector<Event>& events);
  bool fork(RequestId source, RequestId id, const SamplingParams& sampling, int32_t max_tokens);
  void release_conversation(uint64_t key);
  // Frees every sequence (KV pool about to be re-created) and returns the live requests'
  // token lists to the waiting queue, so they are prefilled again into the new pool.
  void detach_all_sequences();
  // Ends every request with an Error event (model unloaded).
  void fail_all(const std::string& message, std::vector<Event>& events);

  bool has_work() const;
  void step(std::vector<Event>& events);

  int32_t num_running() const;
  int32_t num_waiting() const;
  int32_t num_swapped() const;
  int32_t num_parked() const { return int32_t(parked_.size()); }
  uint64_t preemptions() const { return preemptions_; }
  uint64_t swapped_bytes() const { return swapped_bytes_; }
  double swap_ms() const { return swap_ms_; }
  uint64_t generated_tokens() const { return generated_tokens_; }
  std::vector<SequenceOwner> sequence_owners() const;

  // Lets a new KvCache replace the old one (after detach_all_sequences).
  void set_kv_cache(KvCache& kv) { kv_ = &kv; }

 private:
  enum class Phase : uint8_t { Waiting, Running, Swapped };
  struct Active;
  struct Planned;

  void swap_in_ready();
  std::vector<Planned> plan_step();
  bool admit(Active& a);
  bool prefix_in_flight(const Active& a) const;
  void make_room(std::vector<Planned>& plan);
  void preempt(Active& victim);
  void run_forward(std::vector<Planned>& plan, std::vector<Event>& events);
  void accept_token(Active& a, int32_t token, std::vector<Event>& events);
  void finish(Active& a, FinishReason reason, std::vector<Event>& events);
  void slide_window(Active& a);
  std::vector<Active*> by_priority(Phase phase);
  void park(Active& a);
  void release_parked_lru();

  Model& model_;
  KvCache* kv_;
  std::unique_ptr<CpuForward> own_cpu_;   // the first constructor's backend
  ForwardBackend* forward_;
  SchedulerLimits limits_;

  // Live requests by id. An Active holds a KV sequence (seq >= 0) when Running, none when
  // Waiting, and a host copy when Swapped.
  std::map<RequestId, std::unique_ptr<Active>> active_;
  // Finished turns kept for the conversation's next turn: key -> sequence (all tokens computed).
  struct Parked {
    SeqId seq;
    uint64_t last_used;
  };
  std::unordered_map<uint64_t, Parked> parked_;
  uint64_t use_counter_ = 0;
  uint64_t arrival_counter_ = 0;

  uint64_t preemptions_ = 0;
  uint64_t swapped_bytes_ = 0;
  double swap_ms_ = 0;
  uint64_t generated_tokens_ = 0;
  std::vector<float> logits_;
};

}  // namespace kvdesk
