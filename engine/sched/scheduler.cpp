// Scheduler: plan a step, secure KV slots (releasing parked turns and preempting when the
// pool runs dry), run one forward pass, sample, emit events. See scheduler.h for the policy.
#include "engine/sched/scheduler.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/runtime/percentile.h"
#include "engine/system/thread_pool.h"

namespace kvdesk {
namespace {

double ms_between(Scheduler::Clock::time_point a, Scheduler::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int32_t blocks_for(int64_t tokens, int32_t block_size) {
  return int32_t((tokens + block_size - 1) / block_size);
}

}  // namespace

const char* preempt_mode_name(PreemptMode mode) {
  return mode == PreemptMode::Swap ? "swap" : "recompute";
}

// One live request. tokens is everything its sequence should hold (prompt + generated); the
// KV cache knows how many of them are computed.
struct Scheduler::Active {
  RequestId id = 0;
  Request request;                  // settings; messages are dropped once tokenized
  std::vector<int32_t> tokens;      // [prompt + generated]
  int32_t prompt_tokens = 0;
  int32_t generated = 0;
  Phase phase = Phase::Waiting;
  SeqId seq = -1;
  uint64_t arrival = 0;
  bool admitted_once = false;
  std::unique_ptr<Sampler> sampler;
  Utf8Stream utf8;
  RequestMetrics metrics;
  Clock::time_point submitted, first_scheduled, first_token, last_token;
  int32_t prefill_computed = 0;     // prompt tokens computed before the first token
  std::vector<double> itl_ms;

  int32_t remaining(const KvCache& kv) const { return int32_t(tokens.size()) - kv.num_computed(seq); }
};

// A slice of one sequence's tokens in this step: positions [begin, begin + count).
struct Scheduler::Planned {
  Active* a;
  int32_t begin;
  int32_t count;
};

Scheduler::Scheduler(Model& model, KvCache& kv, ThreadPool& pool, const SchedulerLimits& limits)
    : model_(model), kv_(&kv), own_cpu_(std::make_unique<CpuForward>(model, pool)), forward_(own_cpu_.get()),
      limits_(limits) {}

Scheduler::Scheduler(Model& model, KvCache& kv, ForwardBackend& forward, const SchedulerLimits& limits)
    : model_(model), kv_(&kv), forward_(&forward), limits_(limits) {}

Scheduler::~Scheduler() = default;

void Scheduler::add(RequestId id, const Request& request, std::vector<int32_t> prompt,
                    Clock::time_point submitted) {
  const int32_t context = model_.config().context_length;
  if (prompt.empty()) throw Error("the prompt is empty");
  if (request.max_tokens < 1) throw Error("max_tokens must be at least 1");
  if (request.context_policy == ContextPolicy::Stop && int32_t(prompt.size()) >= context) {
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens; the model's context is " +
                std::to_string(context) + " (use the sink-window context policy to keep going)");
  }
  const int64_t most_tokens = std::min<int64_t>(int64_t(prompt.size()) + request.max_tokens, context);
  const int32_t needed = blocks_for(most_tokens, kv_->block_size());
  if (needed > kv_->num_blocks()) {
    throw Error("this request can need " + std::to_string(needed) + " KV blocks but the whole pool has " +
                std::to_string(kv_->num_blocks()) + ": raise the KV budget or lower max tokens");
  }
  auto a = std::make_unique<Active>();
  a->id = id;
  a->request = request;
  a->request.messages.clear();
  a->sampler = std::make_unique<Sampler>(request.sampling);
  a->prompt_tokens = int32_t(prompt.size());
  a->tokens = std::move(prompt);
  a->arrival = ++arrival_counter_;
  a->submitted = submitted;
  a->metrics.prompt_tokens = a->prompt_tokens;
  if (int32_t(a->tokens.size()) >= context) slide_window(*a);
  active_.emplace(id, std::move(a));
}

bool Scheduler::cancel(RequestId id, std::vector<Event>& events) {
  auto it = active_.find(id);
  if (it == active_.end()) return false;
  it->second->request.conversation_key = 0;
  finish(*it->second, FinishReason::Cancelled, events);
  return true;
}

bool Scheduler::fork(RequestId source, RequestId id, const SamplingParams& sampling, int32_t max_tokens) {
  auto it = active_.find(source);
  if (it == active_.end()) return false;
  const Active& src = *it->second;
  auto a = std::make_unique<Active>();
  a->id = id;
  a->request = src.request;
  a->request.sampling = sampling;
  a->request.max_tokens = max_tokens;
  a->request.conversation_key = 0;
  a->sampler = std::make_unique<Sampler>(sampling);
  a->tokens = src.tokens;
  a->prompt_tokens = int32_t(src.tokens.size());
  a->arrival = ++arrival_counter_;
  a->submitted = Clock::now();
  a->metrics.prompt_tokens = a->prompt_tokens;
  if (src.phase == Phase::Running) {
    a->seq = kv_->fork(src.seq);
    a->phase = Phase::Running;
    a->admitted_once = true;
    a->first_scheduled = a->submitted;
    a->metrics.cached_tokens = kv_->num_computed(a->seq);
  }
  active_.emplace(id, std::move(a));
  return true;
}

void Scheduler::release_conversation(uint64_t key) {
  auto it = parked_.find(key);
  if (it == parked_.end()) return;
  kv_->free_sequence(it->second.seq);
  parked_.erase(it);
}

void Scheduler::detach_all_sequences() {
  for (auto& [id, a] : active_) {
    if (a->seq >= 0) kv_->free_sequence(a->seq);
    a->seq = -1;
    a->phase = Phase::Waiting;
  }
  for (auto& [key, p] : parked_) kv_->free_sequence(p.seq);
  parked_.clear();
}

void Scheduler::fail_all(const std::string& message, std::vector<Event>& events) {
  for (auto& [id, a] : active_) {
    if (a->seq >= 0) kv_->free_sequence(a->seq);
    Event e;
    e.kind = EventKind::Error;
    e.request = id;
    e.text = message;
    events.push_back(std::move(e));
  }
  active_.clear();
  for (auto& [key, p] : parked_) kv_->free_sequence(p.seq);
  parked_.clear();
}

std::vector<SequenceOwner> Scheduler::sequence_owners() const {
  std::vector<SequenceOwner> owners;
  for (const auto& [id, a] : active_) {
    if (a->seq >= 0) owners.push_back(SequenceOwner{a->seq, id, a->request.conversation_key});
  }
  for (const auto& [key, p] : parked_) owners.push_back(SequenceOwner{p.seq, 0, key});
  return owners;
}

bool Scheduler::has_work() const { return !active_.empty(); }

int32_t Scheduler::num_running() const {
  return int32_t(std::count_if(active_.begin(), active_.end(), [](const auto& kv) { return kv.second->phase == Phase::Running; }));
}
int32_t Scheduler::num_waiting() const {
  return int32_t(std::count_if(active_.begin(), active_.end(), [](const auto& kv) { return kv.second->phase == Phase::Waiting; }));
}
int32_t Scheduler::num_swapped() const {
  return int32_t(std::count_if(active_.begin(), active_.end(), [](const auto& kv) { return kv.second->phase == Phase::Swapped; }));
}

std::vector<Scheduler::Active*> Scheduler::by_priority(Phase phase) {
  std::vector<Active*> out;
  for (auto& [id, a] : active_) {
    if (a->phase == phase) out.push_back(a.get());
  }
  std::sort(out.begin(), out.end(), [](const Active* x, const Active* y) {
    return x->request.priority != y->request.priority ? x->request.priority > y->request.priority
                                                      : x->arrival < y->arrival;
  });
  return out;
}

void Scheduler::step(std::vector<Event>& events) {
  swap_in_ready();
  std::vector<Planned> plan = plan_step();
  if (!plan.empty()) run_forward(plan, events);
}

void Scheduler::swap_in_ready() {
  for (Active* a : by_priority(Phase::Swapped)) {
    if (kv_->blocks_to_swap_in(a->seq) > kv_->num_available_blocks()) return;
    const auto start = Clock::now();
    if (!kv_->swap_in(a->seq)) return;
    swap_ms_ += ms_between(start, Clock::now());
    a->phase = Phase::Running;
  }
}

// Decodes first (one token each), then prefill chunks of running sequences, then new
// requests, all within the step's token budget; then KV slots for everything planned.
std::vector<Scheduler::Planned> Scheduler::plan_step() {
  std::vector<Planned> plan;
  int32_t budget = limits_.step_token_budget;
  const std::vector<Active*> running = by_priority(Phase::Running);
  for (Active* a : running) {
    if (budget > 0 && a->remaining(*kv_) == 1) {
      plan.push_back({a, kv_->num_computed(a->seq), 1});
      --budget;
    }
  }
  for (Active* a : running) {
    const int32_t remaining = a->remaining(*kv_);
    if (budget > 0 && remaining > 1) {
      const int32_t count = std::min(remaining, budget);
      plan.push_back({a, kv_->num_computed(a->seq), count});
      budget -= count;
    }
  }
  int32_t num_running = int32_t(running.size());
  for (Active* a : by_priority(Phase::Waiting)) {
    if (budget <= 0 || num_running >= limits_.max_running) break;
    if (prefix_in_flight(*a)) continue;
    if (!admit(*a)) break;
    const int32_t count = std::min(a->remaining(*kv_), budget);
    plan.push_back({a, kv_->num_computed(a->seq), count});
    budget -= count;
    ++num_running;
  }
  // Secure KV slots in plan order (highest priority first). Each failure frees room and
  // rescans, since freeing can remove entries before or after the current one.
  auto appended = [&](const Planned& p) { return kv_->num_tokens(p.a->seq) >= p.begin + p.count; };
  for (size_t i = 0; i < plan.size();) {
    const Planned& p = plan[i];
    if (appended(p) || kv_->append(p.a->seq, std::span<const int32_t>(p.a->tokens.data() + p.begin, size_t(p.count)))) {
      ++i;
      continue;
    }
    make_room(plan);
    i = 0;
  }
  return plan;
}

// True when a running sequence is still computing the first block of tokens this request
// starts with: admitting it a step later finds that block in the prefix cache instead of
// computing and storing the same system prompt twice.
bool Scheduler::prefix_in_flight(const Active& a) const {
  const int32_t bs = kv_->block_size();
  if (int32_t(a.tokens.size()) <= bs) return false;
  for (const auto& [id, other] : active_) {
    if (other->phase != Phase::Running || kv_->num_computed(other->seq) >= bs) continue;
    if (int32_t(other->tokens.size()) > bs && std::equal(a.tokens.begin(), a.tokens.begin() + bs, other->tokens.begin())) {
      return true;
    }
  }
  return false;
}

// A waiting request gets a sequence: its parked previous turn when that is a strict prefix
// of its tokens, else whatever the prefix cache holds of its first full blocks.
bool Scheduler::admit(Active& a) {
  const uint64_t key = a.request.conversation_key;
  if (auto it = parked_.find(key); key != 0 && it != parked_.end()) {
    const std::vector<int32_t>& held = kv_->tokens(it->second.seq);
    const bool continues = held.size() < a.tokens.size() && std::equal(held.begin(), held.end(), a.tokens.begin());
    if (continues) {
      a.seq = it->second.seq;
    } else {
      kv_->free_sequence(it->second.seq);
    }
    parked_.erase(it);
  }
  if (a.seq < 0) {
    a.seq = kv_->create_sequence();
    kv_->attach_cached_prefix(a.seq, a.tokens);
  }
  kv_->set_retention(a.seq, a.request.retention, int32_t(a.tokens.size()));
  const int32_t first_chunk = std::min(a.remaining(*kv_), limits_.step_token_budget);
  while (kv_->blocks_needed(a.seq, first_chunk) > kv_->num_available_blocks() && !parked_.empty()) {
    release_parked_lru();
  }
  if (kv_->blocks_needed(a.seq, first_chunk) > kv_->num_available_blocks()) {
    kv_->free_sequence(a.seq);
    a.seq = -1;
    return false;
  }
  if (!a.admitted_once) {
    a.admitted_once = true;
    a.first_scheduled = Clock::now();
    a.metrics.queue_ms = ms_between(a.submitted, a.first_scheduled);
    a.metrics.cached_tokens = kv_->num_computed(a.seq);
  }
  a.phase = Phase::Running;
  return true;
}

// Frees blocks for the plan: parked turns first, then the lowest-priority newest running
// sequence (which may be the one that needed the room).
void Scheduler::make_room(std::vector<Planned>& plan) {
  if (!parked_.empty()) {
    release_parked_lru();
    return;
  }
  Active* victim = by_priority(Phase::Running).back();
  preempt(*victim);
  std::erase_if(plan, [&](const Planned& p) { return p.a == victim; });
}

void Scheduler::preempt(Active& victim) {
  ++preemptions_;
  ++victim.metrics.preemptions;
  if (limits_.preempt_mode == PreemptMode::Swap) {
    const auto start = Clock::now();
    swapped_bytes_ += kv_->swap_out(victim.seq);
    swap_ms_ += ms_between(start, Clock::now());
    victim.phase = Phase::Swapped;
    return;
  }
  kv_->free_sequence(victim.seq);
  victim.seq = -1;
  victim.phase = Phase::Waiting;
}

void Scheduler::run_forward(std::vector<Planned>& plan, std::vector<Event>& events) {
  ForwardBatch batch;
  for (const Planned& p : plan) {
    const int32_t end = p.begin + p.count;
    for (int32_t pos = p.begin; pos < end; ++pos) {
      batch.add(p.a->tokens[pos], pos, p.a->seq, pos + 1 == int32_t(p.a->tokens.size()));
    }
  }
  forward_->forward(batch, *kv_, logits_);
  const int32_t vocab = model_.config().vocab_size;
  int32_t row = 0;
  for (const Planned& p : plan) {
    Active& a = *p.a;
    kv_->mark_computed(a.seq, p.begin + p.count);
    if (a.generated == 0 && p.begin < a.prompt_tokens) a.prefill_computed += p.count;
    if (p.begin + p.count != int32_t(a.tokens.size())) continue;
    const float* row_logits = logits_.data() + size_t(row++) * size_t(vocab);
    accept_token(a, a.sampler->sample(row_logits, vocab, a.tokens), events);
  }
}

void Scheduler::accept_token(Active& a, int32_t token, std::vector<Event>& events) {
  const auto now = Clock::now();
  if (a.generated == 0) {
    a.first_token = now;
    a.metrics.ttft_ms = ms_between(a.submitted, now);
    const double prefill_ms = ms_between(a.first_scheduled, now);
    a.metrics.prefill_tok_s = prefill_ms > 0 ? a.prefill_computed * 1000.0 / prefill_ms : 0;
  } else {
    a.itl_ms.push_back(ms_between(a.last_token, now));
  }
  a.last_token = now;
  const Tokenizer& tokenizer = model_.tokenizer();
  if (a.request.stop_at_eos && tokenizer.is_end_of_generation(token)) {
    finish(a, FinishReason::Stop, events);
    return;
  }
  a.tokens.push_back(token);
  ++a.generated;
  ++generated_tokens_;
  Event e;
  e.kind = EventKind::Token;
  e.request = a.id;
  e.token = token;
  e.text = a.utf8.push(tokenizer.token_bytes(token));
  events.push_back(std::move(e));
  if (a.generated >= a.request.max_tokens) {
    finish(a, FinishReason::Length, events);
  } else if (int32_t(a.tokens.size()) > model_.config().context_length) {
    if (a.request.context_policy == ContextPolicy::Stop) {
      finish(a, FinishReason::ContextFull, events);
    } else {
      slide_window(a);
    }
  }
}

void Scheduler::finish(Active& a, FinishReason reason, std::vector<Event>& events) {
  const std::string tail = a.utf8.flush();
  if (!tail.empty()) {
    Event e;
    e.kind = EventKind::Token;
    e.request = a.id;
    e.text = tail;
    events.push_back(std::move(e));
  }
  RequestMetrics& m = a.metrics;
  m.generated_tokens = a.generated;
  const double decode_ms = ms_between(a.first_token, a.last_token);
  m.decode_tok_s = a.generated > 1 && decode_ms > 0 ? (a.generated - 1) * 1000.0 / decode_ms : 0;
  m.itl_p50_ms = percentile(a.itl_ms, 0.50);
  m.itl_p95_ms = percentile(a.itl_ms, 0.95);
  Event e;
  e.kind = EventKind::Finished;
  e.request = a.id;
  e.finish = reason;
  e.metrics = m;
  events.push_back(std::move(e));
  if (a.seq >= 0) {
    if (a.request.conversation_key != 0 && a.phase == Phase::Running) {
      park(a);
    } else {
      kv_->free_sequence(a.seq);
    }
  }
  active_.erase(a.id);
}

// StreamingLLM: keep the first sink tokens (attention sinks) and the most recent half of the
// context, drop the middle, and prefill the kept tokens again at positions 0..n-1, so every
// RoPE position stays inside the model's trained range. The sinks' blocks come back from the
// prefix cache; the window is recomputed once per half-context of generation.
void Scheduler::slide_window(Active& a) {
  const int32_t context = model_.config().context_length;
  const int32_t sinks = std::clamp(a.request.sink_tokens, 0, context / 4);
  const int32_t recent = context / 2 - sinks;
  std::vector<int32_t> kept(a.tokens.begin(), a.tokens.begin() + sinks);
  kept.insert(kept.end(), a.tokens.end() - recent, a.tokens.end());
  a.tokens = std::move(kept);
  a.prompt_tokens = std::min<int32_t>(a.prompt_tokens, int32_t(a.tokens.size()));
  if (a.seq >= 0) kv_->free_sequence(a.seq);
  a.seq = -1;
  a.phase = Phase::Waiting;
}

void Scheduler::park(Active& a) {
  release_conversation(a.request.conversation_key);
  parked_[a.request.conversation_key] = Parked{a.seq, ++use_counter_};
}

void Scheduler::release_parked_lru() {
  auto oldest = std::min_element(parked_.begin(), parked_.end(),
                                 [](const auto& x, const auto& y) { return x.second.last_used < y.second.last_used; });
  kv_->free_sequence(oldest->second.seq);
  parked_.erase(oldest);
}

}  // namespace kvdesk
