// Scheduler: plan a step and secure its KV slots, releasing parked turns and preempting when
// the pool runs dry. See scheduler.h for the policy and its invariants.
#include "engine/sched/scheduler.h"

#include <algorithm>
#include <chrono>

#include "kernels/check.h"

namespace kvdesk {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

const char* preempt_mode_name(PreemptMode mode) {
  return mode == PreemptMode::Swap ? "swap" : "recompute";
}

// One live request. tokens is everything its sequence should hold (prompt + generated); the
// KV cache knows how many of them are computed.
struct Scheduler::Entry {
  RequestId id = 0;
  SequenceRequest request;
  std::vector<int32_t> tokens;      // [prompt + generated]
  Phase phase = Phase::Waiting;
  SeqId seq = -1;
  uint64_t arrival = 0;
  bool admitted_once = false;
  int32_t peak_blocks = 0;
  int32_t host_tier_tokens = 0;     // tokens its parked turn brought back from the tier

  int32_t remaining(const KvCache& kv) const { return int32_t(tokens.size()) - kv.num_computed(seq); }
};

int32_t StepPlan::num_tokens() const {
  int32_t n = 0;
  for (const ScheduledChunk& c : chunks) n += c.count;
  return n;
}

Scheduler::Scheduler(KvCache& kv, const SchedulerLimits& limits)
    : kv_(&kv), limits_(limits), tier_(limits.host_tier_bytes, limits.host_tier_zstd_level) {}

Scheduler::~Scheduler() = default;

int32_t Scheduler::blocks_for(int64_t tokens) const {
  return kv_->blocks_for_sequence(tokens, limits_.step_token_budget);
}

void Scheduler::add(RequestId id, std::vector<int32_t> tokens, const SequenceRequest& request) {
  KVDESK_ASSERT(!tokens.empty() && !contains(id));
  auto e = std::make_unique<Entry>();
  e->id = id;
  e->request = request;
  e->tokens = std::move(tokens);
  e->arrival = ++arrival_counter_;
  entries_.emplace(id, std::move(e));
}

bool Scheduler::fork(RequestId source, RequestId id) {
  auto it = entries_.find(source);
  if (it == entries_.end()) return false;
  const Entry& src = *it->second;
  auto e = std::make_unique<Entry>();
  e->id = id;
  e->request = src.request;
  e->request.conversation_key = 0;
  e->tokens = src.tokens;
  e->arrival = ++arrival_counter_;
  if (src.phase == Phase::Running) {
    e->seq = kv_->fork(src.seq);
    e->phase = Phase::Running;
    e->admitted_once = true;
  }
  entries_.emplace(id, std::move(e));
  return true;
}

void Scheduler::finish(RequestId id, bool park_turn) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = *it->second;
  if (e.seq >= 0) {
    if (park_turn && e.request.conversation_key != 0 && e.phase == Phase::Running) {
      park(e);
    } else {
      free_sequence(e.seq);
    }
  }
  entries_.erase(it);
}

void Scheduler::release_conversation(uint64_t key) {
  for (size_t i = parked_.size(); i-- > 0;) {
    if (parked_[i].key == key) release_parked(i);
  }
}

SeqId Scheduler::newest_parked(uint64_t key) const {
  const Parked* newest = nullptr;
  for (const Parked& p : parked_) {
    if (p.key == key && (!newest || p.last_used > newest->last_used)) newest = &p;
  }
  return newest ? newest->seq : -1;
}

void Scheduler::adopt_parked(uint64_t key, SeqId seq) {
  KVDESK_ASSERT(key != 0 && kv_->num_computed(seq) == kv_->num_tokens(seq));
  Entry turn;
  turn.request.conversation_key = key;
  turn.seq = seq;
  park(turn);
}

std::optional<std::vector<uint8_t>> Scheduler::parked_blocks(SeqId seq) const {
  if (!kv_->keeps_prefix(seq, kv_->num_computed(seq))) return std::nullopt;
  return kv_->is_swapped(seq) ? tier_.peek(seq) : kv_->export_blocks(seq);
}

void Scheduler::detach_all_sequences() {
  for (auto& [id, e] : entries_) {
    if (e->seq >= 0) free_sequence(e->seq);
    e->seq = -1;
    e->phase = Phase::Waiting;
  }
  for (const Parked& p : parked_) free_sequence(p.seq);
  parked_.clear();
}

void Scheduler::set_host_tier_budget(size_t bytes) {
  KVDESK_ASSERT(tier_.held_bytes() == 0);
  limits_.host_tier_bytes = bytes;
  tier_ = HostTier(bytes, limits_.host_tier_zstd_level);
}

void Scheduler::clear() {
  detach_all_sequences();
  entries_.clear();
}

const std::vector<int32_t>& Scheduler::tokens(RequestId id) const { return entries_.at(id)->tokens; }

int32_t Scheduler::peak_blocks(RequestId id) const { return entries_.at(id)->peak_blocks; }

std::vector<SequenceOwner> Scheduler::sequence_owners() const {
  std::vector<SequenceOwner> owners;
  for (const auto& [id, e] : entries_) {
    if (e->seq >= 0) owners.push_back(SequenceOwner{e->seq, id, e->request.conversation_key});
  }
  for (const Parked& p : parked_) owners.push_back(SequenceOwner{p.seq, 0, p.key});
  return owners;
}

int32_t Scheduler::count(Phase phase) const {
  return int32_t(std::count_if(entries_.begin(), entries_.end(), [&](const auto& kv) { return kv.second->phase == phase; }));
}
int32_t Scheduler::num_running() const { return count(Phase::Running); }
int32_t Scheduler::num_waiting() const { return count(Phase::Waiting); }
int32_t Scheduler::num_swapped() const { return count(Phase::Swapped); }

std::vector<Scheduler::Entry*> Scheduler::by_priority(Phase phase) {
  std::vector<Entry*> out;
  for (auto& [id, e] : entries_) {
    if (e->phase == phase) out.push_back(e.get());
  }
  std::sort(out.begin(), out.end(), [](const Entry* x, const Entry* y) {
    return x->request.priority != y->request.priority ? x->request.priority > y->request.priority
                                                      : x->arrival < y->arrival;
  });
  return out;
}

StepPlan Scheduler::plan() {
  swap_in_ready();
  StepPlan plan;
  int32_t budget = limits_.step_token_budget;
  plan_running(budget, plan);
  if (num_swapped() == 0) plan_admissions(budget, plan);
  secure_slots(plan);
  return plan;
}

// A swapped sequence comes back only with room for its next token too, so it runs at once
// and is not the first victim of its own step.
void Scheduler::swap_in_ready() {
  for (Entry* e : by_priority(Phase::Swapped)) {
    const int32_t slots = kv_->num_slots(e->seq);
    const int32_t next_token = (kv_blocks_for(slots + 1, kv_->block_size()) - kv_blocks_for(slots, kv_->block_size())) *
                               kv_->layer_groups().num_groups;
    const int32_t needed = kv_->blocks_to_swap_in(e->seq) + next_token;
    while (needed > kv_->num_available_blocks() && evict_parked_lru()) {}
    if (needed > kv_->num_available_blocks()) return;
    bring_back(e->seq);
    e->phase = Phase::Running;
  }
}

// Decodes first (one token each), then prefill chunks of running sequences.
void Scheduler::plan_running(int32_t& budget, StepPlan& plan) {
  const std::vector<Entry*> running = by_priority(Phase::Running);
  for (Entry* e : running) {
    if (budget > 0 && e->remaining(*kv_) == 1) {
      plan.chunks.push_back({e->id, e->seq, kv_->num_computed(e->seq), 1, true});
      --budget;
    }
  }
  for (Entry* e : running) {
    const int32_t remaining = e->remaining(*kv_);
    if (budget > 0 && remaining > 1) {
      const int32_t n = std::min(remaining, budget);
      plan.chunks.push_back({e->id, e->seq, kv_->num_computed(e->seq), n, n == remaining});
      budget -= n;
    }
  }
}

void Scheduler::plan_admissions(int32_t& budget, StepPlan& plan) {
  int32_t running = num_running();
  for (Entry* e : by_priority(Phase::Waiting)) {
    if (budget <= 0 || running >= limits_.max_running) break;
    if (prefix_in_flight(*e)) continue;
    const bool first = !e->admitted_once;
    if (!admit(*e)) break;
    const int32_t computed = kv_->num_computed(e->seq);
    if (first) plan.admitted.push_back({e->id, computed, e->host_tier_tokens});
    const int32_t remaining = e->remaining(*kv_);
    const int32_t n = std::min(remaining, budget);
    plan.chunks.push_back({e->id, e->seq, computed, n, n == remaining});
    budget -= n;
    ++running;
  }
}

// KV slots in plan order (highest priority first). Each failure frees room and rescans, since
// freeing can remove entries before or after the current one.
void Scheduler::secure_slots(StepPlan& plan) {
  auto appended = [&](const ScheduledChunk& c) { return kv_->num_tokens(c.seq) >= c.begin + c.count; };
  for (size_t i = 0; i < plan.chunks.size();) {
    const ScheduledChunk& c = plan.chunks[i];
    const Entry& e = *entries_.at(c.id);
    if (appended(c) || kv_->append(c.seq, std::span<const int32_t>(e.tokens.data() + c.begin, size_t(c.count)))) {
      ++i;
      continue;
    }
    make_room(plan);
    i = 0;
  }
}

// True when a running sequence is still computing the first block of tokens this request
// starts with: admitting it a step later finds that block in the prefix cache instead of
// computing and storing the same system prompt twice.
bool Scheduler::prefix_in_flight(const Entry& e) const {
  const int32_t bs = kv_->block_size();
  if (e.request.compute_all || int32_t(e.tokens.size()) <= bs) return false;
  for (const auto& [id, other] : entries_) {
    if (other->phase != Phase::Running || kv_->num_computed(other->seq) >= bs) continue;
    if (int32_t(other->tokens.size()) > bs && std::equal(e.tokens.begin(), e.tokens.begin() + bs, other->tokens.begin())) {
      return true;
    }
  }
  return false;
}

// A waiting request gets a sequence: from a parked turn (attach_parked), else whatever the
// prefix cache holds of its first full blocks (none when every token must be computed).
bool Scheduler::admit(Entry& e) {
  const Attach attached = e.request.compute_all ? Attach::None : attach_parked(e);
  if (attached == Attach::Wait) return false;
  if (attached == Attach::None) {
    e.seq = kv_->create_sequence();
    if (!e.request.compute_all) kv_->attach_cached_prefix(e.seq, e.tokens);
  }
  kv_->set_retention(e.seq, e.request.retention, int32_t(e.tokens.size()));
  const int32_t first_chunk = std::min(e.remaining(*kv_), limits_.step_token_budget);
  while (kv_->blocks_needed(e.seq, first_chunk) > kv_->num_available_blocks() && evict_parked_lru()) {}
  if (kv_->blocks_needed(e.seq, first_chunk) > kv_->num_available_blocks()) {
    free_sequence(e.seq);
    e.seq = -1;
    return false;
  }
  e.admitted_once = true;
  e.phase = Phase::Running;
  return true;
}

// The parked turn sharing the longest prefix with e's tokens, of any conversation (the KV of
// equal tokens is equal). Its own conversation's turn that e continues (a strict prefix of
// e's tokens) is taken over; otherwise e gets a fork truncated where they diverge, leaving
// at least one token to compute (its logits are needed), and the parked turn stays. A turn
// compacted by retention can be continued but not forked (its rows no longer match a prefix),
// nor one whose sliding windows let go of the blocks the branch point reads.
// A turn in the host tier comes back into the pool first.
Scheduler::Attach Scheduler::attach_parked(Entry& e) {
  int32_t shared = 0;
  const size_t best = best_parked(e, shared);
  if (best == parked_.size()) return Attach::None;
  const SeqId held = parked_[best].seq;
  const bool continues = parked_[best].key == e.request.conversation_key && shared == kv_->num_tokens(held) &&
                         shared < int32_t(e.tokens.size());
  const int32_t branch_point = std::min(shared, int32_t(e.tokens.size()) - 1);
  if (!continues && (branch_point == 0 || !kv_->keeps_prefix(held, branch_point))) return Attach::None;
  if (kv_->is_swapped(held)) {
    const Attach back = swap_in_parked(held);
    if (back != Attach::Attached) return back;
    e.host_tier_tokens = continues ? shared : branch_point;
  }
  const auto p = std::find_if(parked_.begin(), parked_.end(), [&](const Parked& q) { return q.seq == held; });
  if (continues) {
    e.seq = held;
    parked_.erase(p);
    return Attach::Attached;
  }
  e.seq = kv_->fork_prefix(held, branch_point);
  p->last_used = ++use_counter_;
  return Attach::Attached;
}

size_t Scheduler::best_parked(const Entry& e, int32_t& shared) const {
  size_t best = parked_.size();
  shared = 0;
  for (size_t i = 0; i < parked_.size(); ++i) {
    const std::vector<int32_t>& held = kv_->tokens(parked_[i].seq);
    const size_t n = std::min(held.size(), e.tokens.size());
    const int32_t common = int32_t(std::mismatch(held.begin(), held.begin() + ptrdiff_t(n), e.tokens.begin()).first - held.begin());
    if (common > shared) {
      best = i;
      shared = common;
    }
  }
  return best;
}

// The turn becomes the tier's most recently used entry, so making room drops it last.
Scheduler::Attach Scheduler::swap_in_parked(SeqId seq) {
  tier_.touch(seq);
  auto short_of_room = [&] { return kv_->blocks_to_swap_in(seq) > kv_->num_available_blocks(); };
  while (tier_.contains(seq) && short_of_room() && evict_parked_lru()) {}
  if (!tier_.contains(seq)) return Attach::None;   // dropped for room: freed
  if (short_of_room()) return Attach::Wait;
  bring_back(seq);
  tier_.count_hit();
  return Attach::Attached;
}

// Frees blocks for the plan: parked turns first, then the lowest-priority newest running
// sequence (which may be the one that needed the room).
void Scheduler::make_room(StepPlan& plan) {
  if (evict_parked_lru()) return;
  std::vector<Entry*> running = by_priority(Phase::Running);
  KVDESK_ASSERT(!running.empty());   // add() refused what the whole pool cannot hold
  Entry* victim = running.back();
  preempt(*victim);
  std::erase_if(plan.chunks, [&](const ScheduledChunk& c) { return c.id == victim->id; });
}

// Swap mode falls back to recompute when the host tier cannot take the victim.
void Scheduler::preempt(Entry& victim) {
  ++preemptions_;
  if (limits_.preempt_mode == PreemptMode::Swap) {
    const size_t bytes = kv_->block_table(victim.seq).size() * kv_->bytes_per_block();
    if (move_to_tier(victim.seq, false)) {
      swapped_bytes_ += bytes;
      victim.phase = Phase::Swapped;
      return;
    }
  }
  free_sequence(victim.seq);
  victim.seq = -1;
  victim.phase = Phase::Waiting;
}

void Scheduler::computed(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    Entry& e = *entries_.at(c.id);
    e.peak_blocks = std::max(e.peak_blocks, int32_t(kv_->block_table(c.seq).size()));
    kv_->mark_computed(c.seq, c.begin + c.count);
  }
}

void Scheduler::append_token(RequestId id, int32_t token) { entries_.at(id)->tokens.push_back(token); }

void Scheduler::restart(RequestId id, std::vector<int32_t> tokens) {
  Entry& e = *entries_.at(id);
  KVDESK_ASSERT(!tokens.empty());
  e.tokens = std::move(tokens);
  if (e.seq >= 0) free_sequence(e.seq);
  e.seq = -1;
  e.phase = Phase::Waiting;
}

// The new turn replaces the conversation's parked turns it continues (their tokens are a
// prefix of its own); the other branches stay, at most kMaxParkedBranches in all.
void Scheduler::park(Entry& e) {
  const uint64_t key = e.request.conversation_key;
  const std::vector<int32_t>& tokens = kv_->tokens(e.seq);
  for (size_t i = parked_.size(); i-- > 0;) {
    const std::vector<int32_t>& held = kv_->tokens(parked_[i].seq);
    const bool superseded = held.size() <= tokens.size() && std::equal(held.begin(), held.end(), tokens.begin());
    if (parked_[i].key == key && superseded) release_parked(i);
  }
  const auto branches = std::count_if(parked_.begin(), parked_.end(), [&](const Parked& p) { return p.key == key; });
  if (branches >= kMaxParkedBranches) release_parked(oldest_parked(key));
  parked_.push_back(Parked{key, e.seq, ++use_counter_});
}

bool Scheduler::evict_parked_lru() {
  size_t oldest = parked_.size();
  for (size_t i = 0; i < parked_.size(); ++i) {
    if (kv_->is_swapped(parked_[i].seq)) continue;
    if (oldest == parked_.size() || parked_[i].last_used < parked_[oldest].last_used) oldest = i;
  }
  if (oldest == parked_.size()) return false;
  const SeqId seq = parked_[oldest].seq;
  if (move_to_tier(seq, true)) return true;
  const auto p = std::find_if(parked_.begin(), parked_.end(), [&](const Parked& q) { return q.seq == seq; });
  release_parked(size_t(p - parked_.begin()));
  return true;
}

void Scheduler::release_parked(size_t index) {
  free_sequence(parked_[index].seq);
  parked_.erase(parked_.begin() + ptrdiff_t(index));
}

bool Scheduler::move_to_tier(SeqId seq, bool droppable) {
  if (!tier_.enabled()) return false;
  const int32_t blocks = int32_t(kv_->block_table(seq).size());
  const auto start = Clock::now();
  const HostTier::StoreResult result = tier_.store(seq, kv_->swap_out(seq), blocks, droppable);
  swap_ms_ += ms_since(start);
  for (SeqId dropped : result.dropped) {
    const auto p = std::find_if(parked_.begin(), parked_.end(), [&](const Parked& q) { return q.seq == dropped; });
    KVDESK_ASSERT(p != parked_.end());
    kv_->free_sequence(dropped);
    parked_.erase(p);
  }
  return result.stored;
}

void Scheduler::bring_back(SeqId seq) {
  const auto start = Clock::now();
  const bool loaded = kv_->swap_in(seq, tier_.take(seq));
  KVDESK_ASSERT(loaded);   // the caller made room
  swap_ms_ += ms_since(start);
}

void Scheduler::free_sequence(SeqId seq) {
  if (tier_.contains(seq)) tier_.erase(seq);
  kv_->free_sequence(seq);
}

size_t Scheduler::oldest_parked(uint64_t key) const {
  size_t oldest = parked_.size();
  for (size_t i = 0; i < parked_.size(); ++i) {
    const bool candidate = parked_[i].key == key;
    if (candidate && (oldest == parked_.size() || parked_[i].last_used < parked_[oldest].last_used)) oldest = i;
  }
  KVDESK_ASSERT(oldest < parked_.size());
  return oldest;
}

void Scheduler::check_invariants() const {
  kv_->check_invariants();
  tier_.check_invariants();
  std::vector<SeqId> held;
  int32_t swapped = 0;
  for (const auto& [id, e] : entries_) {
    KVDESK_ASSERT(e->id == id);
    if (e->phase == Phase::Waiting) {
      KVDESK_ASSERT(e->seq < 0);
      continue;
    }
    KVDESK_ASSERT(e->seq >= 0);
    KVDESK_ASSERT(kv_->is_swapped(e->seq) == (e->phase == Phase::Swapped));
    KVDESK_ASSERT(tier_.contains(e->seq) == (e->phase == Phase::Swapped));
    swapped += e->phase == Phase::Swapped ? 1 : 0;
    const std::vector<int32_t>& stored = kv_->tokens(e->seq);
    KVDESK_ASSERT(stored.size() <= e->tokens.size() && std::equal(stored.begin(), stored.end(), e->tokens.begin()));
    held.push_back(e->seq);
  }
  for (const Parked& p : parked_) {
    KVDESK_ASSERT(kv_->num_computed(p.seq) == kv_->num_tokens(p.seq));
    KVDESK_ASSERT(tier_.contains(p.seq) == kv_->is_swapped(p.seq));
    swapped += kv_->is_swapped(p.seq) ? 1 : 0;
    KVDESK_ASSERT(std::count_if(parked_.begin(), parked_.end(), [&](const Parked& q) { return q.key == p.key; }) <=
                  kMaxParkedBranches);
    held.push_back(p.seq);
  }
  std::sort(held.begin(), held.end());
  KVDESK_ASSERT(std::adjacent_find(held.begin(), held.end()) == held.end());
  KVDESK_ASSERT(tier_.stats().entries == swapped);
}

}  // namespace kvdesk
