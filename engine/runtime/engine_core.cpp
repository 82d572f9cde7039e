// EngineCore: plan -> forward -> sample -> events. See engine_core.h.
#include "engine/runtime/engine_core.h"

#include <algorithm>

#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/model/model.h"
#include "engine/runtime/percentile.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/token_printing.h"
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
  std::unique_ptr<grammar::GrammarMatcher> matcher;   // the request's constraint; null when free
  // Parallel samples not forked yet: ids id + 1 .. id + unforked, forked from this request
  // once its prompt is computed, just before its first token is drawn.
  int32_t unforked = 0;
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
  if (request.samples < 1 || request.samples > kMaxSamples) {
    throw Error("samples must be from 1 to " + std::to_string(kMaxSamples));
  }
  std::unique_ptr<Live> live = make_live(id, request, request.sampling);
  live->request.messages.clear();
  live->request.prompt_tokens.clear();
  live->unforked = scoring ? 0 : request.samples - 1;
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

// A request's bookkeeping: its settings, sampler and, under a constraint, its grammar matcher
// at the grammar's start.
std::unique_ptr<EngineCore::Live> EngineCore::make_live(RequestId id, const Request& request,
                                                        const SamplingParams& sampling) {
  auto live = std::make_unique<Live>();
  live->id = id;
  live->request = request;
  live->request.sampling = sampling;
  live->sampler = std::make_unique<Sampler>(sampling);
  const OutputConstraint& c = request.constraint;
  if (c.active() && c.triggers.empty()) {
    live->matcher = std::make_unique<grammar::GrammarMatcher>(c.grammar, token_table(request.print_control_tokens));
  } else if (c.active()) {
    live->matcher = std::make_unique<grammar::GrammarMatcher>(c.grammar, token_table(request.print_control_tokens), c.triggers);
  }
  if (live->matcher) reuse_grammar_tables(*live->matcher, *c.grammar, request.print_control_tokens);
  return live;
}

// A finished request's grammar tables, for the next request with the same rules (replacing
// older tables of those rules); the least recently finished go past kKeptGrammars grammars or
// kKeptGrammarBytes in all.
void EngineCore::keep_grammar_tables(Live& live) {
  if (!live.matcher) return;
  KeptGrammar kept{live.request.print_control_tokens, live.matcher->take_tables()};
  if (!kept.tables.sets || kept.tables.sets->over_budget() || kept.tables.footprint_bytes() > kKeptGrammarBytes) return;
  std::erase_if(kept_grammars_, [&](const KeptGrammar& k) { return k.print_control_tokens == kept.print_control_tokens &&
                                                                    grammar::same_rules(*k.tables.grammar, *kept.tables.grammar); });
  kept_grammars_.push_back(std::move(kept));
  auto total_bytes = [&] {
    size_t bytes = 0;
    for (const KeptGrammar& k : kept_grammars_) bytes += k.tables.footprint_bytes();
    return bytes;
  };
  while (kept_grammars_.size() > kKeptGrammars || total_bytes() > kKeptGrammarBytes) kept_grammars_.erase(kept_grammars_.begin());
}

// Hands the matcher the tables a finished request of the same rules left, if any.
void EngineCore::reuse_grammar_tables(grammar::GrammarMatcher& matcher, const grammar::Grammar& grammar, bool print_control_tokens) {
  for (auto it = kept_grammars_.begin(); it != kept_grammars_.end(); ++it) {
    if (it->print_control_tokens != print_control_tokens || !grammar::same_rules(*it->tables.grammar, grammar)) continue;
    matcher.reuse_tables(std::move(it->tables));
    kept_grammars_.erase(it);
    return;
  }
}

const std::shared_ptr<const grammar::TokenTable>& EngineCore::token_table(bool print_control_tokens) {
  std::shared_ptr<const grammar::TokenTable>& table = token_tables_[print_control_tokens ? 1 : 0];
  if (!table) table = grammar_token_table(model_.tokenizer(), print_control_tokens);
  return table;
}

bool EngineCore::fork(RequestId source, RequestId id, const SamplingParams& sampling, int32_t max_tokens) {
  auto it = live_.find(source);
  if (it == live_.end() || !scheduler_.fork(source, id)) return false;
  const Live& src = *it->second;
  std::unique_ptr<Live> live = make_live(id, src.request, sampling);
  live->request.max_tokens = max_tokens;
  live->request.conversation_key = 0;
  live->request.logits = LogitsOutput::None;
  live->request.samples = 1;
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
  const std::vector<RequestId> forked = fork_samples(live);
  sample(live, last_row, events);
  for (RequestId id : forked) {
    if (auto it = live_.find(id); it != live_.end()) sample(*it->second, last_row, events);
  }
}

// Parallel sampling (the PagedAttention paper's): each other sample forks the request's
// sequence, sharing every KV block of the prompt, before any of them draws a token; each draws
// from the same logits with its own seed, and copy-on-write splits the blocks they then write.
std::vector<RequestId> EngineCore::fork_samples(Live& live) {
  const int32_t count = live.unforked;
  live.unforked = 0;
  std::vector<RequestId> forked;
  for (int32_t i = 1; i <= count; ++i) {
    SamplingParams sampling = live.request.sampling;
    sampling.seed += uint64_t(i);
    fork(live.id, live.id + RequestId(i), sampling, live.request.max_tokens);
    Live& sample = *live_.at(live.id + RequestId(i));
    sample.submitted = live.submitted;
    sample.first_scheduled = live.first_scheduled;
    sample.prefill_computed = live.prefill_computed;
    sample.metrics.cached_tokens = live.prompt_tokens;
    forked.push_back(sample.id);
  }
  return forked;
}

// Draws the request's next token (under its grammar, if any) and hands it on.
void EngineCore::sample(Live& live, const float* last_row, std::vector<Event>& events) {
  const int32_t vocab = model_.config().vocab_size;
  const bool wants_logprobs = live.request.top_logprobs >= 0;
  SampleReport report;
  int32_t token = -1;
  try {
    token = live.sampler->sample(last_row, vocab, scheduler_.tokens(live.id), live.matcher.get(),
                                 wants_logprobs ? &report : nullptr, live.request.top_logprobs);
  } catch (const Error& e) {   // a grammar too ambiguous to follow
    fail(live, std::string("the grammar allows no next token it can decide: ") + e.what(), events);
    return;
  }
  if (token < 0) {
    if (live.matcher && live.matcher->can_end()) {
      finish(live, FinishReason::Stop, events);
    } else {
      fail(live, "the grammar allows no token of this model's vocabulary here", events);
    }
    return;
  }
  if (live.matcher && !model_.tokenizer().is_end_of_generation(token)) advance_grammar(live, token);
  accept_token(live, token, wants_logprobs ? &report : nullptr, events);
}

void EngineCore::accept_token(Live& live, int32_t token, const SampleReport* report, std::vector<Event>& events) {
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
  e.text = live.utf8.push(printed_token(tokenizer, token, live.request.print_control_tokens));
  if (report) {
    e.logprob = report->logprob;
    e.token_bytes = printed_token(tokenizer, token, live.request.print_control_tokens);
    e.top_logprobs = report->top;
    for (TokenLogprob& t : e.top_logprobs) t.bytes = printed_token(tokenizer, t.token, live.request.print_control_tokens);
  }
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
  end_unforked_samples(live, events, "");
  scheduler_.finish(live.id, live.request.conversation_key != 0);
  keep_grammar_tables(live);
  live_.erase(live.id);
}

// Ends one request with an error event; its blocks go back as a finished request's do.
void EngineCore::fail(Live& live, const std::string& message, std::vector<Event>& events) {
  events.push_back(error_event(live.id, message));
  end_unforked_samples(live, events, message);
  scheduler_.finish(live.id, false);
  live_.erase(live.id);
}

// A lazy grammar's trigger can end inside a token whose remaining bytes the grammar refuses
// (the model began the markup and went on otherwise): the answer then stays free, and its
// text is parsed as it is. Under a started grammar the mask only lets allowed tokens through.
void EngineCore::advance_grammar(Live& live, int32_t token) {
  try {
    live.matcher->accept(token);
  } catch (const Error&) {
    if (live.matcher->triggered()) throw;
    live.matcher.reset();
  }
}

// A request that ends before its prompt was computed never forks its other samples: they end
// with it, cancelled (or with its error), so whoever waits for them is not left waiting.
void EngineCore::end_unforked_samples(const Live& live, std::vector<Event>& events, const std::string& error) {
  for (int32_t i = 1; i <= live.unforked; ++i) {
    const RequestId id = live.id + RequestId(i);
    if (!error.empty()) {
      events.push_back(error_event(id, error));
      continue;
    }
    Event e;
    e.kind = EventKind::Finished;
    e.request = id;
    e.finish = FinishReason::Cancelled;
    e.metrics.prompt_tokens = live.prompt_tokens;
    events.push_back(std::move(e));
  }
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
