// EngineCore: plan -> forward -> sample -> events. See engine_core.h.
#include "engine/runtime/engine_core.h"

#include <algorithm>

#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/runtime/percentile.h"
#include "engine/runtime/sampler.h"
#include "engine/tokenizer/utf8_stream.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

double ms_between(EngineCore::Clock::time_point a, EngineCore::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

Event error_event(RequestId request, const std::string& message) {
  Event e;
  e.kind = EventKind::Error;
  e.request = request;
  e.text = message;
  return e;
}

// Whether any of the n values is NaN: a loop without an early exit, so that the compiler can
// compare whole vectors (it runs once per sampled token, over the whole vocabulary).
bool has_nan(const float* x, int32_t n) {
  bool nan = false;
  for (int32_t i = 0; i < n; ++i) nan |= x[i] != x[i];
  return nan;
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::ContextFull: return "context_full";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

// What a request has beyond its tokens (the scheduler's): settings, sampler, text stream, timing.
struct EngineCore::Live {
  RequestId id = 0;
  Request request;                  // settings; messages and prompt tokens are dropped once queued
  int32_t prompt_tokens = 0;
  int32_t generated = 0;
  std::unique_ptr<Sampler> sampler;
  Utf8Stream utf8;
  RequestMetrics metrics;
  Clock::time_point submitted, first_scheduled, first_token, last_token;
  int32_t prefill_computed = 0;     // prompt tokens computed before the first token
  std::vector<double> itl_ms;
};

EngineCore::EngineCore(Model& model, ForwardBackend& forward, KvCache& kv, const SchedulerLimits& limits)
    : model_(model), forward_(forward), kv_(&kv), scheduler_(kv, limits) {}

EngineCore::~EngineCore() = default;

void EngineCore::set_kv_cache(KvCache& kv) {
  kv_ = &kv;
  scheduler_.set_kv_cache(kv);
}

void EngineCore::add(RequestId id, const Request& request, std::vector<int32_t> prompt, Clock::time_point submitted) {
  const int32_t context = context_of(request);
  const bool scoring = request.logits == LogitsOutput::Prompt;
  if (prompt.empty()) throw Error("the prompt is empty");
  if (request.max_tokens < (scoring ? 0 : 1)) throw Error("max_tokens must be at least 1");
  if (request.context_limit < 0) throw Error("context_limit must be 0 (the model's) or more");
  if (request.context_policy == ContextPolicy::Stop && int32_t(prompt.size()) >= context + (scoring ? 1 : 0)) {
    const std::string whose = context < model_.config().context_length ? "the request's context limit is "
                                                                        : "the model's context is ";
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens; " + whose + std::to_string(context) +
                " (use the sink-window context policy to keep going)");
  }
  const int64_t most_tokens = std::min<int64_t>(int64_t(prompt.size()) + request.max_tokens, context);
  if (!scheduler_.fits_pool(most_tokens)) {
    throw Error("this request can need " + std::to_string(scheduler_.blocks_for(most_tokens)) +
                " KV blocks but the whole pool has " + std::to_string(kv_->num_blocks()) +
                ": raise the KV budget or lower max tokens");
  }
  auto live = std::make_unique<Live>();
  live->id = id;
  live->request = request;
  live->request.messages.clear();
  live->request.prompt_tokens.clear();
  live->sampler = std::make_unique<Sampler>(request.sampling);
  live->prompt_tokens = int32_t(prompt.size());
  live->submitted = submitted;
  live->metrics.prompt_tokens = live->prompt_tokens;
  scheduler_.add(id, std::move(prompt),
                 SequenceRequest{request.priority, request.conversation_key, request.retention, scoring});
  Live& l = *live;
  live_.emplace(id, std::move(live));
  if (l.prompt_tokens >= context && !scoring) slide_window(l);
}

bool EngineCore::cancel(RequestId id, std::vector<Event>& events) {
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  it->second->request.conversation_key = 0;
  finish(*it->second, FinishReason::Cancelled, events);
  return true;
}

bool EngineCore::fork(RequestId source, RequestId id, const SamplingParams& sampling, int32_t max_tokens) {
  auto it = live_.find(source);
  if (it == live_.end() || !scheduler_.fork(source, id)) return false;
  const Live& src = *it->second;
  auto live = std::make_unique<Live>();
  live->id = id;
  live->request = src.request;
  live->request.sampling = sampling;
  live->request.max_tokens = max_tokens;
  live->request.conversation_key = 0;
  live->request.logits = LogitsOutput::None;
  live->sampler = std::make_unique<Sampler>(sampling);
  live->prompt_tokens = int32_t(scheduler_.tokens(id).size());
  live->submitted = Clock::now();
  live->first_scheduled = live->submitted;
  live->metrics.prompt_tokens = live->prompt_tokens;
  live_.emplace(id, std::move(live));
  return true;
}

std::optional<ConversationKv> EngineCore::export_conversation(uint64_t key) const {
  const SeqId seq = scheduler_.newest_parked(key);
  if (seq < 0) return std::nullopt;
  std::optional<std::vector<uint8_t>> blocks = scheduler_.parked_blocks(seq);
  if (!blocks) return std::nullopt;
  ConversationKv out;
  out.tokens = kv_->tokens(seq);
  out.blocks = std::move(*blocks);
  return out;
}

bool EngineCore::import_conversation(uint64_t key, const ConversationKv& kv) {
  const int32_t vocab = model_.config().vocab_size;
  const bool valid = key != 0 && std::all_of(kv.tokens.begin(), kv.tokens.end(), [&](int32_t t) { return t >= 0 && t < vocab; });
  if (!valid) return false;
  const std::optional<SeqId> seq = kv_->import_sequence(kv.tokens, kv.blocks);
  if (!seq) return false;
  scheduler_.adopt_parked(key, *seq);
  return true;
}

void EngineCore::fail_all(const std::string& message, std::vector<Event>& events) {
  for (auto& [id, live] : live_) events.push_back(error_event(id, message));
  live_.clear();
  scheduler_.clear();
}

int32_t EngineCore::step(std::vector<Event>& events) {
  const StepPlan plan = scheduler_.plan();
  const auto now = Clock::now();
  for (const Admission& a : plan.admitted) {
    Live& live = *live_.at(a.id);
    live.first_scheduled = now;
    live.metrics.queue_ms = ms_between(live.submitted, now);
    live.metrics.cached_tokens = a.cached_tokens;
    live.metrics.host_tier_tokens = a.host_tier_tokens;
  }
  if (!plan.chunks.empty()) run_forward(plan, events);
  return plan.num_tokens();
}

// One forward pass over every planned token. A chunk asks for the logits of its last token
// when that token ends the request's list (the next one is sampled), and of every prompt
// position when the request scores its prompt.
void EngineCore::run_forward(const StepPlan& plan, std::vector<Event>& events) {
  ForwardBatch batch;
  std::vector<int32_t> rows(plan.chunks.size(), 0);   // [chunks] logits rows each asked for
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    const Live& live = *live_.at(c.id);
    const bool scoring = live.request.logits == LogitsOutput::Prompt;
    const std::vector<int32_t>& tokens = scheduler_.tokens(c.id);
    for (int32_t pos = c.begin; pos < c.begin + c.count; ++pos) {
      const bool wanted = (c.reaches_end && pos + 1 == c.begin + c.count) || (scoring && pos < live.prompt_tokens);
      batch.add(tokens[size_t(pos)], pos, c.seq, wanted);
      rows[i] += wanted ? 1 : 0;
    }
  }
  forward_.forward(batch, *kv_, logits_);
  scheduler_.computed(plan);
  const size_t vocab = size_t(model_.config().vocab_size);
  size_t row = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    Live& live = *live_.at(c.id);
    if (c.begin < live.prompt_tokens && live.generated == 0) live.prefill_computed += c.count;
    if (live.request.logits == LogitsOutput::Prompt) emit_prompt_logits(c, live, logits_.data() + row * vocab, events);
    row += size_t(rows[i]);
    if (c.reaches_end) after_chunk(c, logits_.data() + (row - 1) * vocab, events);
  }
}

void EngineCore::emit_prompt_logits(const ScheduledChunk& c, const Live& live, const float* rows,
                                    std::vector<Event>& events) {
  const int32_t n = std::min(c.begin + c.count, live.prompt_tokens) - c.begin;
  if (n <= 0) return;
  const size_t vocab = size_t(model_.config().vocab_size);
  Event e;
  e.kind = EventKind::Logits;
  e.request = c.id;
  e.position = c.begin;
  e.logits.assign(rows, rows + size_t(n) * vocab);
  events.push_back(std::move(e));
}

// The chunk computed the request's last token: sample the next one, or end a scoring request
// that wants no token.
void EngineCore::after_chunk(const ScheduledChunk& c, const float* last_row, std::vector<Event>& events) {
  Live& live = *live_.at(c.id);
  if (live.generated >= live.request.max_tokens) {
    finish(live, FinishReason::Length, events);
    return;
  }
  const int32_t vocab = model_.config().vocab_size;
  // NaN logits come from weights that are damaged or out of any sane range; sampling them would
  // print arbitrary tokens as if they were an answer.
  if (has_nan(last_row, vocab)) {
    fail(live, "the model computed NaN logits: its weights are damaged or out of range; try another file", events);
    return;
  }
  const int32_t token = live.sampler->sample(last_row, vocab, scheduler_.tokens(c.id));
  accept_token(live, token, events);
}

void EngineCore::accept_token(Live& live, int32_t token, std::vector<Event>& events) {
  const auto now = Clock::now();
  if (live.generated == 0) {
    live.first_token = now;
    live.metrics.ttft_ms = ms_between(live.submitted, now);
    const double prefill_ms = ms_between(live.first_scheduled, now);
    live.metrics.prefill_tok_s = prefill_ms > 0 ? live.prefill_computed * 1000.0 / prefill_ms : 0;
  } else {
    live.itl_ms.push_back(ms_between(live.last_token, now));
  }
  live.last_token = now;
  const Tokenizer& tokenizer = model_.tokenizer();
  if (live.request.stop_at_eos && tokenizer.is_end_of_generation(token)) {
    finish(live, FinishReason::Stop, events);
    return;
  }
  scheduler_.append_token(live.id, token);
  ++live.generated;
  ++generated_tokens_;
  Event e;
  e.kind = EventKind::Token;
  e.request = live.id;
  e.token = token;
  e.text = live.utf8.push(tokenizer.token_bytes(token));
  events.push_back(std::move(e));
  if (live.generated >= live.request.max_tokens) {
    finish(live, FinishReason::Length, events);
  } else if (int32_t(scheduler_.tokens(live.id).size()) > context_of(live.request)) {
    if (live.request.context_policy == ContextPolicy::Stop) {
      finish(live, FinishReason::ContextFull, events);
    } else {
      slide_window(live);
    }
  }
}

void EngineCore::finish(Live& live, FinishReason reason, std::vector<Event>& events) {
  const std::string tail = live.utf8.flush();
  if (!tail.empty()) {
    Event e;
    e.kind = EventKind::Token;
    e.request = live.id;
    e.text = tail;
    events.push_back(std::move(e));
  }
  RequestMetrics& m = live.metrics;
  m.generated_tokens = live.generated;
  m.peak_blocks = scheduler_.peak_blocks(live.id);
  const double decode_ms = ms_between(live.first_token, live.last_token);
  m.decode_tok_s = live.generated > 1 && decode_ms > 0 ? (live.generated - 1) * 1000.0 / decode_ms : 0;
  m.itl_p50_ms = percentile(live.itl_ms, 0.50);
  m.itl_p95_ms = percentile(live.itl_ms, 0.95);
  Event e;
  e.kind = EventKind::Finished;
  e.request = live.id;
  e.finish = reason;
  e.metrics = m;
  events.push_back(std::move(e));
  scheduler_.finish(live.id, live.request.conversation_key != 0);
  live_.erase(live.id);
}

// Ends one request with an error event; its blocks go back as a finished request's do.
void EngineCore::fail(Live& live, const std::string& message, std::vector<Event>& events) {
  events.push_back(error_event(live.id, message));
  scheduler_.finish(live.id, false);
  live_.erase(live.id);
}

// StreamingLLM: keep the first sink tokens (attention sinks) and the most recent half of the
// context, drop the middle, and prefill the kept tokens again at positions 0..n-1, so every
// RoPE position stays inside the model's trained range. The sinks' blocks come back from the
// prefix cache; the window is recomputed once per half-context of generation.
void EngineCore::slide_window(Live& live) {
  const int32_t context = context_of(live.request);
  const int32_t sinks = std::clamp(live.request.sink_tokens, 0, context / 4);
  const int32_t recent = context / 2 - sinks;
  const std::vector<int32_t>& tokens = scheduler_.tokens(live.id);
  std::vector<int32_t> kept(tokens.begin(), tokens.begin() + sinks);
  kept.insert(kept.end(), tokens.end() - recent, tokens.end());
  live.prompt_tokens = std::min<int32_t>(live.prompt_tokens, int32_t(kept.size()));
  scheduler_.restart(live.id, std::move(kept));
}

int32_t EngineCore::context_of(const Request& request) const {
  const int32_t model_context = model_.config().context_length;
  return request.context_limit > 0 ? std::min(request.context_limit, model_context) : model_context;
}

}  // namespace kvdesk
