// Replayer: a loop that submits turns whose time has come, drains events, and records.
#include "app/replay/replayer.h"

#include <algorithm>
#include <thread>

#include "app/replay/metrics_json.h"
#include "engine/error.h"
#include "engine/runtime/percentile.h"

namespace kvdesk {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void wait_for_model(EngineClient& engine) {
  for (;;) {
    for (const Event& e : engine.poll_events()) {
      if (e.kind == EventKind::ModelLoaded) return;
      if (e.kind == EventKind::Error) throw Error(e.text);
    }
    engine.wait_idle(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Replayer::Replayer(std::vector<TraceConversation> trace, const RetentionOptions& retention)
    : trace_(std::move(trace)), retention_(retention) {
  for (const TraceConversation& c : trace_) {
    conversations_.push_back(Conversation{&c, {}, {}, 0, c.turns.empty() ? 0 : c.turns[0].start_ms, 0});
  }
}

void Replayer::run(const EngineSettings& settings, const std::atomic<bool>* stop) {
  Engine engine([this] { wake(); });
  engine.load_model(settings);
  play(engine, stop);
}

void Replayer::run(const remote::RemoteOptions& server, const std::atomic<bool>* stop) {
  remote::RemoteEngine engine(server, [this] { wake(); });
  play(engine, stop);
}

void Replayer::play(EngineClient& engine, const std::atomic<bool>* stop) {
  wait_for_model(engine);
  last_stats_ = engine.stats();
  first_kv_ = last_stats_.kv;
  start_ = Clock::now();
  while (!done() && !(stop && stop->load())) {
    submit_ready(engine);
    // Statistics are published before events, so these are at least as new as the events.
    const std::vector<Event> events = engine.poll_events();
    last_stats_ = engine.stats();
    peak_blocks_ = std::max(peak_blocks_, last_stats_.kv.blocks_used);
    handle(events);
    std::unique_lock<std::mutex> lock(mutex_);
    wake_cv_.wait_for(lock, std::chrono::milliseconds(2), [this] { return woken_; });
    woken_ = false;
  }
  wall_ms_ = elapsed_ms();
  for (const Conversation& c : conversations_) {
    if (c.in_flight != 0) engine.cancel(c.in_flight);
  }
  engine.wait_idle(std::chrono::seconds(10));
  last_stats_ = engine.stats();
}

// The conversation's branch for turn t, as the app makes it: a Send appends the user message, a
// Regenerate drops the last answer, an Edit drops user message t.edit_user and everything after
// it and appends the new text in its place.
void Replayer::branch(Conversation& c, const TraceTurn& t) {
  if (c.history.empty() && !t.system.empty()) {
    c.history.push_back({"system", t.system});
    c.spans.emplace_back();
  }
  if (t.kind == TurnKind::Regenerate) {
    if (!c.history.empty() && c.history.back().role == "assistant") {
      c.history.pop_back();
      c.spans.pop_back();
    }
    return;
  }
  if (t.kind == TurnKind::Edit) {
    int32_t users = 0;
    size_t at = 0;
    while (at < c.history.size() && !(c.history[at].role == "user" && users++ == t.edit_user)) ++at;
    c.history.resize(at);
    c.spans.resize(at);
  }
  c.history.push_back({"user", t.user});
  c.spans.emplace_back();
}

void Replayer::wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  woken_ = true;
  wake_cv_.notify_one();
}

double Replayer::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
}

bool Replayer::done() const {
  return std::all_of(conversations_.begin(), conversations_.end(), [](const Conversation& c) {
    return c.next_turn == c.trace->turns.size() && c.in_flight == 0;
  });
}

void Replayer::submit_ready(EngineClient& engine) {
  const double now = elapsed_ms();
  for (size_t i = 0; i < conversations_.size(); ++i) {
    Conversation& c = conversations_[i];
    if (c.in_flight != 0 || c.next_turn == c.trace->turns.size() || c.ready_at_ms > now) continue;
    const TraceTurn& t = c.trace->turns[c.next_turn];
    branch(c, t);
    Request r;
    r.messages = c.history;
    r.message_tokens = c.spans;
    r.max_tokens = t.max_tokens;
    r.sampling.temperature = t.temperature;
    r.conversation_key = i + 1;
    r.retention = retention_;
    c.in_flight = engine.submit(r);
    conversation_of_[c.in_flight] = i;
    const KvSnapshot& kv = last_stats_.kv;
    results_.push_back(TurnResult{c.trace->name, c.next_turn, t.kind, {}, kv.cow_copies, kv.forks, {}, {}});
    result_of_[c.in_flight] = results_.size() - 1;
  }
}

void Replayer::handle(const std::vector<Event>& events) {
  for (const Event& e : events) {
    auto it = conversation_of_.find(e.request);
    if (it == conversation_of_.end()) continue;
    TurnResult& r = results_[result_of_[e.request]];
    if (e.kind == EventKind::Token) {
      r.text += e.text;
      if (e.token >= 0) r.tokens.push_back(e.token);
    } else if (e.kind == EventKind::Error) {
      throw Error("conversation '" + r.conversation + "' turn " + std::to_string(r.turn) + ": " + e.text);
    } else if (e.kind == EventKind::Finished) {
      finish_turn(conversations_[it->second], r, e);
    }
  }
}

// The turn's answer joins the history with its ids, and the history's messages take the spans
// the engine reported; the turn's KV counters become the change since it was submitted.
void Replayer::finish_turn(Conversation& c, TurnResult& r, const Event& finished) {
  r.metrics = finished.metrics;
  r.cow_copies = last_stats_.kv.cow_copies - r.cow_copies;
  r.forks = last_stats_.kv.forks - r.forks;
  const ChatTokens& reported = finished.chat_tokens;
  for (size_t i = 0; i < c.spans.size() && i < reported.messages.size(); ++i) {
    c.spans[i] = reported.messages[i].empty() ? MessageTokens{} : MessageTokens{reported.identity, reported.messages[i]};
  }
  c.history.push_back({"assistant", r.text});
  c.spans.push_back(reported.answer.empty() ? MessageTokens{} : MessageTokens{reported.identity, reported.answer});
  c.in_flight = 0;
  ++c.next_turn;
  if (c.next_turn < c.trace->turns.size()) c.ready_at_ms = elapsed_ms() + c.trace->turns[c.next_turn].start_ms;
}

ReplaySummary Replayer::summary() const {
  ReplaySummary s;
  std::vector<double> ttft, itl50, itl95;
  int64_t output_tokens = 0;
  for (const TurnResult& r : results_) {
    ttft.push_back(r.metrics.ttft_ms);
    if (r.metrics.generated_tokens > 1) {
      itl50.push_back(r.metrics.itl_p50_ms);
      itl95.push_back(r.metrics.itl_p95_ms);
    }
    output_tokens += std::max<int64_t>(int64_t(r.tokens.size()), r.metrics.generated_tokens);   // a server sends no ids
  }
  const double seconds = wall_ms_ / 1000.0;
  s.wall_ms = wall_ms_;
  s.requests_per_s = seconds > 0 ? double(results_.size()) / seconds : 0;
  s.output_tok_s = seconds > 0 ? double(output_tokens) / seconds : 0;
  s.ttft_p50_ms = percentile(ttft, 0.5);
  s.ttft_p95_ms = percentile(ttft, 0.95);
  s.itl_p50_ms = percentile(itl50, 0.5);
  s.itl_p95_ms = percentile(itl95, 0.95);
  s.peak_kv_blocks = peak_blocks_;
  s.prefix_hit_rate = last_stats_.kv.prefix_hit_rate;
  s.preemptions = last_stats_.preemptions;
  s.swapped_bytes = last_stats_.swapped_bytes;
  s.host_tier_hits = last_stats_.kv.host_tier.hits;
  s.host_tier_drops = last_stats_.kv.host_tier.drops;
  s.cow_copies = last_stats_.kv.cow_copies - first_kv_.cow_copies;
  s.forks = last_stats_.kv.forks - first_kv_.forks;
  s.retention_tokens_seen = last_stats_.kv.retention_tokens_seen;
  s.retention_tokens_kept = last_stats_.kv.retention_tokens_kept;
  s.retention_blocks_freed = last_stats_.kv.retention_blocks_freed;
  return s;
}

nlohmann::json Replayer::report_json() const {
  nlohmann::json turns = nlohmann::json::array();
  for (const TurnResult& r : results_) {
    nlohmann::json turn = metrics_json(r.metrics);
    turn.update({{"conversation", r.conversation}, {"turn", r.turn}, {"kind", turn_kind_name(r.kind)},
                 {"cow_copies", r.cow_copies}, {"forks", r.forks}, {"tokens", r.tokens}, {"text", r.text}});
    turns.push_back(std::move(turn));
  }
  const ReplaySummary s = summary();
  nlohmann::json summary = {
      {"wall_ms", s.wall_ms}, {"requests_per_s", s.requests_per_s}, {"output_tok_s", s.output_tok_s},
      {"ttft_p50_ms", s.ttft_p50_ms}, {"ttft_p95_ms", s.ttft_p95_ms}, {"itl_p50_ms", s.itl_p50_ms},
      {"itl_p95_ms", s.itl_p95_ms}, {"peak_kv_blocks", s.peak_kv_blocks}, {"prefix_hit_rate", s.prefix_hit_rate},
      {"preemptions", s.preemptions}, {"swapped_bytes", s.swapped_bytes}, {"cow_copies", s.cow_copies}, {"forks", s.forks},
      {"host_tier_hits", s.host_tier_hits}, {"host_tier_drops", s.host_tier_drops},
      {"retention_tokens_seen", s.retention_tokens_seen}, {"retention_tokens_kept", s.retention_tokens_kept},
      {"retention_blocks_freed", s.retention_blocks_freed},
  };
  return {{"backend", last_stats_.model.backend}, {"backend_note", last_stats_.model.backend_note},
          {"turns", turns}, {"summary", summary}};
}

}  // namespace kvdesk
