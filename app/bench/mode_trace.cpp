// kvdesk-bench trace: replays a chat trace (app/replay/trace.h; synthetic from --seed without
// --trace) through the Engine in real time with the Replayer: requests/s, output tok/s, TTFT and
// inter-token latency p50/p95, peak KV, prefix hits, preemptions, KV copy-on-write copies and
// forks (branch turns fork parked turns), and with --cost-per-hour the cost per request and per
// 1K output tokens (machine cost x wall time / work done).
#include <fstream>
#include <map>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "app/replay/replayer.h"
#include "engine/error.h"
#include "engine/kv/kv_storage.h"

namespace kvdesk::bench {
namespace {

struct TraceSource {
  std::string name;
  std::vector<TraceConversation> trace;
};

TraceSource load_trace(const BenchOptions& o) {
  if (!o.trace_path.empty()) return {o.trace_path, read_trace(o.trace_path)};
  ChatWorkload w = o.workload;
  w.seed = o.seed;
  if (o.conversations > 0) w.conversations = o.conversations;
  if (o.turns > 0) w.turns = o.turns;
  TraceSource s{"synthetic (seed " + std::to_string(o.seed) + ")", synthetic_trace(w)};
  if (!o.save_trace.empty()) {
    std::ofstream out(o.save_trace);
    write_trace(s.trace, out);
    if (!out) throw Error(o.save_trace + ": cannot write the trace");
  }
  return s;
}

// Output tokens of every turn: counted ids for the local engine, the server's usage for a remote one.
int64_t output_tokens(const Replayer& replayer) {
  int64_t n = 0;
  for (const TurnResult& t : replayer.results()) n += std::max<int64_t>(int64_t(t.tokens.size()), t.metrics.generated_tokens);
  return n;
}

// Peak KV of the local pool in MiB; a server's pool is its own business (its /metrics say how full).
double peak_kv_mib(const BenchOptions& o, const Knobs& k, const ReplaySummary& s) {
  if (!o.url.empty()) return 0;
  const ModelConfig config = read_config(o.model_path);
  const double block_bytes = double(kv_bytes_per_token(config, k.kv_type, k.kv_type)) * k.block_size;
  return s.peak_kv_blocks * block_bytes / (1024.0 * 1024.0);
}

// One replay's figures, named as in the JSON.
Metrics replay_once(const BenchOptions& o, const Knobs& k, const std::vector<TraceConversation>& trace) {
  Replayer replayer(trace);
  if (o.url.empty()) {
    replayer.run(engine_settings(o, k), &stop_flag());
  } else {
    replayer.run(remote::RemoteOptions{o.url, o.api_key}, &stop_flag());
  }
  const ReplaySummary s = replayer.summary();
  const int64_t output = output_tokens(replayer);
  Metrics m = {{"requests", double(replayer.results().size())},
               {"requests_per_s", s.requests_per_s},
               {"output_tok_s", s.output_tok_s},
               {"ttft_p50_ms", s.ttft_p50_ms},
               {"ttft_p95_ms", s.ttft_p95_ms},
               {"itl_p50_ms", s.itl_p50_ms},
               {"itl_p95_ms", s.itl_p95_ms},
               {"peak_kv_mib", peak_kv_mib(o, k, s)},
               {"prefix_hit_rate", s.prefix_hit_rate},
               {"preemptions", double(s.preemptions)},
               {"cow_copies", double(s.cow_copies)},
               {"forks", double(s.forks)},
               {"wall_s", s.wall_ms / 1000.0}};
  if (o.cost_per_hour > 0) {
    const double cost = o.cost_per_hour * s.wall_ms / 3.6e6;
    const size_t requests = replayer.results().size();
    m.emplace_back("cost_per_request", requests > 0 ? cost / double(requests) : 0);
    m.emplace_back("cost_per_1k_output_tokens", output > 0 ? cost * 1000.0 / double(output) : 0);
  }
  return m;
}

}  // namespace

Report run_trace(const BenchOptions& o) {
  const TraceSource source = load_trace(o);
  Report r;
  r.mode = "trace";
  r.settings = {{"trace", source.name},         {"conversations", source.trace.size()},
                {"repeat", o.repeat},           {"kv_budget_mib", o.kv_budget_mib},
                {"max_running", o.max_running}, {"knobs", knobs_json(o.knobs)}};
  if (o.cost_per_hour > 0) r.settings["cost_per_hour"] = o.cost_per_hour;
  if (!o.url.empty()) r.settings["server"] = o.url;
  std::vector<std::string> names;
  std::map<std::string, std::vector<double>> runs;
  for (int32_t run = 0; run < o.repeat && !stop_requested(); ++run) {
    const Metrics m = replay_once(o, o.knobs, source.trace);
    for (const auto& [name, value] : m) {
      if (runs.find(name) == runs.end()) names.push_back(name);
      runs[name].push_back(value);
    }
    progress("trace run " + std::to_string(run + 1) + "/" + std::to_string(o.repeat) + ": " +
             format_number(runs["requests_per_s"].back(), 2) + " requests/s, " +
             format_number(runs["output_tok_s"].back(), 1) + " output tok/s");
  }
  r.partial = stop_requested();
  Table t{"Serving figures", {"metric", "median (min..max)"}, {}};
  r.results["metrics"] = nlohmann::json::object();
  for (const std::string& name : names) {
    const Stats s = summarize(runs[name]);
    r.results["metrics"][name] = stats_json(s);
    const bool cost = name.rfind("cost", 0) == 0;
    t.rows.push_back({name, cost ? format_significant(s.median, 3) + " (" + format_significant(s.min, 3) + ".." +
                                       format_significant(s.max, 3) + ")"
                                 : format_stats(s, 2)});
  }
  r.tables.push_back(t);
  Plot p{"latency", "Latency percentiles over turns", "", "ms (median of runs)", {}, {{"ms", {}, {}}}};
  for (const char* name : {"ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms"}) {
    p.categories.push_back(name);
    p.series[0].y.push_back(median(runs[name]));
  }
  r.plots.push_back(p);
  r.notes.push_back(
      "Replayed in real time: each conversation's first turn arrives at its arrival time, each later "
      "turn its think time after the previous answer. TTFT and inter-token latency percentiles are "
      "over turns; peak KV counts the blocks held at the busiest moment.");
  return r;
}

Measure trace_measure(const BenchOptions& o) {
  const TraceSource source = load_trace(o);
  return [o, source](const Knobs& k) { return replay_once(o, k, source.trace); };
}

}  // namespace kvdesk::bench
