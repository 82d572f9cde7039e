// kvdesk-bench prefix: TTFT of multi-turn conversations sharing one long system prompt, prefix
// cache on vs off, through the Engine as the app runs them. Turns go one at a time (TTFT is
// prefill, not queueing); each repeat plays the same conversations through a fresh engine per
// arm (on, off, on, off), so the first turn of the first conversation is always cold.
#include <algorithm>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "app/replay/replayer.h"
#include "engine/engine.h"
#include "engine/error.h"

namespace kvdesk::bench {
namespace {

enum Category { kCold, kFirstTurn, kLaterTurn, kNumCategories };
constexpr const char* kCategoryKeys[] = {"ttft_cold_ms", "ttft_first_turn_ms", "ttft_later_turn_ms"};
constexpr const char* kCategoryNames[] = {"cold (first turn, empty cache)", "first turn, shared system prompt",
                                          "later turns, own history"};

struct Conversations {
  std::vector<int32_t> system;                           // BOS + system prompt
  std::vector<std::vector<std::vector<int32_t>>> turns;  // [conversation][turn] user tokens
  int32_t answer_tokens = 8;
};

struct ArmResult {
  std::vector<double> ttft[kNumCategories];
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
};

constexpr int32_t kDefaultConversations = 3;
constexpr int32_t kDefaultTurns = 3;

int32_t conversations(const BenchOptions& o) { return o.conversations > 0 ? o.conversations : kDefaultConversations; }
int32_t turns(const BenchOptions& o) { return o.turns > 0 ? o.turns : kDefaultTurns; }

int32_t system_tokens(const BenchOptions& o, const ModelConfig& config) {
  return o.system_tokens > 0 ? o.system_tokens : config.context_length / 4;
}

// Throws kvdesk::Error when the longest conversation would not fit the model's context.
Conversations make_conversations(const BenchOptions& o, const ModelConfig& config, int32_t bos, uint64_t seed) {
  Rng rng(seed);
  Conversations c;
  const int32_t system = system_tokens(o, config);
  const int64_t longest = 1 + system + int64_t(turns(o)) * (o.user_tokens + o.answer_tokens);
  if (longest >= config.context_length) {
    throw Error("a conversation of " + std::to_string(longest) + " tokens does not fit the model's context of " +
                std::to_string(config.context_length) +
                "; lower --system-tokens, --turns, --user-tokens or --answer-tokens");
  }
  c.system = {bos};
  const std::vector<int32_t> body = random_tokens(system, config.vocab_size, rng);
  c.system.insert(c.system.end(), body.begin(), body.end());
  c.answer_tokens = o.answer_tokens;
  c.turns.assign(size_t(conversations(o)), {});
  for (auto& conversation : c.turns) {
    for (int32_t t = 0; t < turns(o); ++t) conversation.push_back(random_tokens(o.user_tokens, config.vocab_size, rng));
  }
  return c;
}

// Submits one turn and waits for its end; appends the answer to history. No conversation key:
// only the prefix cache can reuse KV here (the app also parks a conversation's sequence
// between its turns, which saves the same tokens).
RequestMetrics run_turn(Engine& engine, std::vector<int32_t>& history, int32_t answer_tokens) {
  Request r;
  r.prompt_tokens = history;
  r.max_tokens = answer_tokens;
  r.stop_at_eos = false;
  const RequestId id = engine.submit(r);
  for (;;) {
    engine.wait_idle(std::chrono::seconds(1));
    for (const Event& e : engine.poll_events()) {
      if (e.request != id) continue;
      if (e.kind == EventKind::Error) throw Error("prefix benchmark turn failed: " + e.text);
      if (e.kind == EventKind::Token && e.token >= 0) history.push_back(e.token);
      if (e.kind == EventKind::Finished) return e.metrics;
    }
  }
}

ArmResult run_arm(const BenchOptions& o, const Knobs& k, const Conversations& c) {
  Engine engine;
  engine.load_model(engine_settings(o, k));
  wait_for_model(engine);
  ArmResult arm;
  for (size_t i = 0; i < c.turns.size(); ++i) {
    std::vector<int32_t> history = c.system;
    for (size_t t = 0; t < c.turns[i].size(); ++t) {
      history.insert(history.end(), c.turns[i][t].begin(), c.turns[i][t].end());
      const RequestMetrics m = run_turn(engine, history, c.answer_tokens);
      const Category cat = t > 0 ? kLaterTurn : (i == 0 ? kCold : kFirstTurn);
      arm.ttft[cat].push_back(m.ttft_ms);
      arm.prompt_tokens += m.prompt_tokens;
      arm.cached_tokens += m.cached_tokens;
    }
  }
  return arm;
}

void merge(ArmResult& into, const ArmResult& run) {
  for (int c = 0; c < kNumCategories; ++c)
    into.ttft[c].insert(into.ttft[c].end(), run.ttft[c].begin(), run.ttft[c].end());
  into.prompt_tokens += run.prompt_tokens;
  into.cached_tokens += run.cached_tokens;
}

double saved_pct(const ArmResult& a) {
  return a.prompt_tokens > 0 ? 100.0 * double(a.cached_tokens) / double(a.prompt_tokens) : 0;
}

void add_results(Report& r, const ArmResult arms[2]) {
  Table t{"Time to first token (ms)", {"turn", "prefix cache on", "prefix cache off", "off / on"}, {}};
  Plot p{"ttft", "TTFT, prefix cache on vs off", "turn", "ms (median)", {}, {{"on", {}, {}}, {"off", {}, {}}}};
  nlohmann::json json_arms = nlohmann::json::array();
  for (int a = 0; a < 2; ++a) {
    nlohmann::json j = {{"prefix_cache", a == 0},
                        {"prompt_tokens", arms[a].prompt_tokens},
                        {"cached_tokens", arms[a].cached_tokens},
                        {"saved_pct", saved_pct(arms[a])}};
    for (int c = 0; c < kNumCategories; ++c) j[kCategoryKeys[c]] = stats_json(summarize(arms[a].ttft[c]));
    json_arms.push_back(j);
  }
  for (int c = 0; c < kNumCategories; ++c) {
    const Stats on = summarize(arms[0].ttft[c]), off = summarize(arms[1].ttft[c]);
    t.rows.push_back({kCategoryNames[c], format_stats(on, 1), format_stats(off, 1),
                      on.median > 0 ? format_number(off.median / on.median, 2) + "x" : "-"});
    p.categories.push_back(c == kCold ? "cold" : (c == kFirstTurn ? "first turn" : "later turns"));
    p.series[0].y.push_back(on.median);
    p.series[1].y.push_back(off.median);
  }
  t.rows.push_back(
      {"prompt tokens computed / total",
       std::to_string(arms[0].prompt_tokens - arms[0].cached_tokens) + " / " + std::to_string(arms[0].prompt_tokens),
       std::to_string(arms[1].prompt_tokens - arms[1].cached_tokens) + " / " + std::to_string(arms[1].prompt_tokens),
       ""});
  r.results["arms"] = json_arms;
  r.results["tokens_saved"] = arms[0].cached_tokens;
  r.results["saved_pct"] = saved_pct(arms[0]);
  r.tables.push_back(t);
  r.plots.push_back(p);
}

}  // namespace

Report run_prefix(const BenchOptions& o) {
  const ModelConfig config = read_config(o.model_path);
  const int32_t bos = read_bos_id(o.model_path);
  Report r;
  r.mode = "prefix";
  ArmResult arms[2];
  for (int32_t run = 0; run < o.repeat && !stop_requested(); ++run) {
    const Conversations c = make_conversations(o, config, bos, o.seed + uint64_t(run));
    for (int a = 0; a < 2 && !stop_requested(); ++a) {
      Knobs k = o.knobs;
      k.prefix_cache = a == 0;
      const ArmResult arm = run_arm(o, k, c);
      merge(arms[a], arm);
      progress("prefix run " + std::to_string(run + 1) + "/" + std::to_string(o.repeat) + " cache " +
               (a == 0 ? "on" : "off") + ": cold TTFT " + format_number(arm.ttft[kCold].front(), 1) + " ms, " +
               std::to_string(arm.cached_tokens) + " of " + std::to_string(arm.prompt_tokens) +
               " prompt tokens cached");
    }
  }
  r.partial = stop_requested();
  r.settings = {{"system_tokens", system_tokens(o, config)},
                {"user_tokens", o.user_tokens},
                {"answer_tokens", o.answer_tokens},
                {"conversations", conversations(o)},
                {"turns", turns(o)},
                {"repeat", o.repeat},
                {"seed", o.seed},
                {"knobs", knobs_json(o.knobs)}};
  add_results(r, arms);
  r.notes.push_back("Each conversation starts with the same system prompt (BOS + random tokens), then user turns of " +
                    std::to_string(o.user_tokens) + " tokens, each answered with " + std::to_string(o.answer_tokens) +
                    " greedy tokens; a later turn's prompt is the whole history. Cold: the first turn of the first "
                    "conversation (nothing cached). With the cache on, later requests reuse every full block of "
                    "their prompt already computed (block size " +
                    std::to_string(o.knobs.block_size) + ").");
  return r;
}

Measure prefix_measure(const BenchOptions& o) {
  const ModelConfig config = read_config(o.model_path);
  const Conversations c = make_conversations(o, config, read_bos_id(o.model_path), o.seed);
  return [o, c](const Knobs& k) {
    const ArmResult arm = run_arm(o, k, c);
    Metrics m;
    for (int cat = 0; cat < kNumCategories; ++cat) m.emplace_back(kCategoryKeys[cat], median(arm.ttft[cat]));
    m.emplace_back("cached_pct", saved_pct(arm));
    return m;
  };
}

}  // namespace kvdesk::bench
