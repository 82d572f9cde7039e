// Scheduler: continuous batching over the paged KV cache, as planning only. It decides which
// sequences run in a step, which of their tokens, and which KV blocks they take; it never runs
// the model, samples or times anything (engine/runtime/engine_core.h does, around it), so it is
// tested on a KV cache alone. Every request is a token list (prompt + what it generated) and a
// count of tokens whose KV is computed; there is no prefill phase vs decode phase (vLLM v1's
// idea). One plan():
//   1. swapped-out sequences come back, highest priority first, while the pool has room for
//      them and their next token (parked turns leave the pool for them); while any stays swapped
//      no new request is admitted, so the room the running ones free goes to the swapped ones
//      first (no starvation, no livelock);
//   2. every running sequence gets its next tokens within a per-step token budget: one token
//      for those generating (so streams never stall), then prefill chunks, then new requests
//      (admitted with their cached prefix: a parked turn or the prefix cache);
//      a new request whose tokens continue a parked turn of its conversation takes that
//      sequence over; one that shares a prefix with a parked turn but then diverges (a
//      regenerated answer, an edited message: a branch) gets a fork of it truncated at the
//      branch point, and the parked turn stays for the other branch; a parked turn in the host
//      tier is swapped back in first (the request waits while the pool lacks room for it);
//   3. their KV slots are appended; when the pool runs dry, parked conversations leave it,
//      least recently used first, then the lowest-priority, newest running sequence is
//      preempted (recompute or swap).
// The host tier (engine/kv/host_tier.h, one byte budget): a parked turn leaving the pool is
// swapped out into it (released when the budget cannot take it, which first drops the tier's
// least recently used parked turns); a swap-preempted sequence is stored there too and never
// dropped, and recomputes instead when the budget cannot take it. A turn is thus only
// recomputed when its conversation fell out of both the pool and the tier.
// After the forward pass, computed() marks the plan's KV as written; the caller then appends
// each sampled token (append_token) or ends the request (finish, which parks a conversation's
// last turn for its next one).
//
// Invariants (check_invariants(), which also checks the KV cache's):
// - a Running entry holds a live, unswapped sequence whose tokens are a prefix of its own
//   token list; a Swapped entry holds a swapped sequence; a Waiting entry holds none;
// - no two entries or parked turns share a sequence id; a parked sequence has every token
//   computed; a conversation has at most kMaxParkedBranches parked turns;
// - a sequence is swapped exactly when the host tier holds its bytes (a Swapped entry, or a
//   parked turn out of the pool), and the tier holds nothing else;
// - a planned chunk lies within its entry's tokens and starts at its computed count.
// Runs on one thread (the engine thread, or the caller's for the synchronous driver).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/engine_types.h"
#include "engine/kv/host_tier.h"
#include "engine/kv/kv_cache.h"

namespace kvdesk {

// What planning needs of a request beyond its tokens.
struct SequenceRequest {
  int32_t priority = 0;              // higher runs first; ties: earlier first
  uint64_t conversation_key = 0;     // non-zero: the finished turn is parked for the next one
  RetentionOptions retention;
  bool compute_all = false;          // compute every token (its logits are wanted): no cached prefix
};

// A slice of one request's tokens in this step: positions [begin, begin + count).
struct ScheduledChunk {
  RequestId id = 0;
  SeqId seq = -1;
  int32_t begin = 0;
  int32_t count = 0;
  bool reaches_end = false;          // its last position is the request's last token: sample after it
};

// A request scheduled for the first time, with the prompt tokens its KV came with.
struct Admission {
  RequestId id = 0;
  int32_t cached_tokens = 0;
  int32_t host_tier_tokens = 0;   // of those, a parked turn's swapped back from the host tier
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;   // highest priority first
  std::vector<Admission> admitted;
  int32_t num_tokens() const;
};

class Scheduler {
 public:
  Scheduler(KvCache& kv, const SchedulerLimits& limits);
  ~Scheduler();

  // Blocks a sequence of `tokens` tokens takes at its peak (every layer group, prefill chunks
  // of the step budget); whether the whole pool can ever hold it.
  int32_t blocks_for(int64_t tokens) const;
  bool fits_pool(int64_t tokens) const { return blocks_for(tokens) <= kv_->num_blocks(); }

  void add(RequestId id, std::vector<int32_t> tokens, const SequenceRequest& request);
  // A new entry with the source's tokens that shares its KV blocks when it is running;
  // false when the source is unknown.
  bool fork(RequestId source, RequestId id);
  // Removes the entry; its sequence is parked (a running conversation turn) when park is set,
  // freed otherwise. Unknown ids are ignored.
  void finish(RequestId id, bool park);
  void release_conversation(uint64_t key);
  // The conversation's most recently parked turn; -1 when it has none.
  SeqId newest_parked(uint64_t key) const;
  // Parks seq (every token computed) as the conversation's newest turn, as if it had just
  // finished there (a conversation's KV restored from bytes).
  void adopt_parked(uint64_t key, SeqId seq);
  // A parked turn's KV as KvCache::export_blocks gives it, from the pool or the host tier;
  // nullopt when retention has compacted it.
  std::optional<std::vector<uint8_t>> parked_blocks(SeqId seq) const;
  // Frees every sequence (KV pool about to be re-created); live entries wait to be prefilled again.
  void detach_all_sequences();
  // Frees every sequence and forgets every entry.
  void clear();
  // Lets a new KvCache replace the old one (after detach_all_sequences).
  void set_kv_cache(KvCache& kv) { kv_ = &kv; }
  // A new host tier of this budget (after detach_all_sequences: the old one holds nothing).
  void set_host_tier_budget(size_t bytes);

  StepPlan plan();
  // The forward pass wrote the plan's KV.
  void computed(const StepPlan& plan);
  void append_token(RequestId id, int32_t token);
  // Replaces the entry's tokens (the sliding window) and returns it to the waiting queue.
  void restart(RequestId id, std::vector<int32_t> tokens);

  bool has_work() const { return !entries_.empty(); }
  bool contains(RequestId id) const { return entries_.count(id) != 0; }
  const std::vector<int32_t>& tokens(RequestId id) const;
  int32_t peak_blocks(RequestId id) const;
  int32_t num_running() const;
  int32_t num_waiting() const;
  int32_t num_swapped() const;
  int32_t num_parked() const { return int32_t(parked_.size()); }
  // Parked turns of one conversation kept at once (its branches); the least recently used
  // one goes first.
  static constexpr int32_t kMaxParkedBranches = 4;
  uint64_t preemptions() const { return preemptions_; }
  const HostTier& host_tier() const { return tier_; }
  uint64_t swapped_bytes() const { return swapped_bytes_; }
  double swap_ms() const { return swap_ms_; }
  std::vector<SequenceOwner> sequence_owners() const;
  void check_invariants() const;

 private:
  enum class Phase : uint8_t { Waiting, Running, Swapped };
  // What attach_parked did: nothing fits, e took a parked turn, or e must wait for room to
  // swap its parked turn back in.
  enum class Attach : uint8_t { None, Attached, Wait };
  struct Entry;

  void swap_in_ready();
  void plan_running(int32_t& budget, StepPlan& plan);
  void plan_admissions(int32_t& budget, StepPlan& plan);
  void secure_slots(StepPlan& plan);
  bool admit(Entry& e);
  // Gives e a sequence from the parked turn sharing its longest prefix.
  Attach attach_parked(Entry& e);
  // The parked turn e should take or fork (index into parked_), and where; parked_.size()
  // when none serves.
  size_t best_parked(const Entry& e, int32_t& shared) const;
  // Brings a parked turn back from the tier, making room by moving other parked turns out;
  // Wait while the pool lacks room, None when the tier dropped it meanwhile.
  Attach swap_in_parked(SeqId seq);
  bool prefix_in_flight(const Entry& e) const;
  void make_room(StepPlan& plan);
  void preempt(Entry& victim);
  std::vector<Entry*> by_priority(Phase phase);
  void park(Entry& e);
  // Moves the least recently used parked turn in the pool to the host tier, or releases it
  // when the tier cannot take it; false when no parked turn is in the pool.
  bool evict_parked_lru();
  void release_parked(size_t index);
  size_t oldest_parked(uint64_t key) const;   // of the conversation
  // Swaps seq out into the tier (droppable: a parked turn); false when the tier could not take
  // it, seq then being swapped with its bytes gone (the caller frees it). Frees the parked
  // turns the tier dropped for room.
  bool move_to_tier(SeqId seq, bool droppable);
  void bring_back(SeqId seq);
  // Frees seq, in the pool or the tier.
  void free_sequence(SeqId seq);
  int32_t count(Phase phase) const;

  KvCache* kv_;
  SchedulerLimits limits_;

  // Live requests by id.
  std::map<RequestId, std::unique_ptr<Entry>> entries_;
  // Finished turns kept for the conversation's next turn or another branch of it (all tokens
  // computed); a conversation may have several, one per branch it went down lately.
  struct Parked {
    uint64_t key;
    SeqId seq;
    uint64_t last_used;
  };
  std::vector<Parked> parked_;
  uint64_t use_counter_ = 0;
  uint64_t arrival_counter_ = 0;
  HostTier tier_;

  uint64_t preemptions_ = 0;
  uint64_t swapped_bytes_ = 0;
  double swap_ms_ = 0;
};

}  // namespace kvdesk
