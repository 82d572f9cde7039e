// kvdesk-bench ab: one knob, two values, everything else fixed (the rule: change one
// thing at a time). The arms run alternately A B A B ... (--repeat pairs) on the same inputs
// in one process, so a shared machine's drift falls on both; each metric is reported as the
// two medians and the B/A ratio of medians, with the spread of the per-pair ratios (min..max).
#include <map>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/error.h"

namespace kvdesk::bench {
namespace {

Measure make_measure(const BenchOptions& o) {
  if (o.ab_mode == "speed") return speed_measure(o);
  if (o.ab_mode == "kv") return kv_measure(o);
  if (o.ab_mode == "prefix") return prefix_measure(o);
  if (o.ab_mode == "trace") return trace_measure(o);
  throw Error("ab cannot run mode '" + o.ab_mode + "' (choose speed, kv, prefix or trace)");
}

struct MetricRuns {
  std::vector<double> a, b, ratio;  // [pairs]
};

}  // namespace

std::vector<Knob> knobs_of_mode(const std::string& mode) {
  if (mode == "speed") return {Knob::KvType, Knob::BlockSize, Knob::KvRecent, Knob::ChunkSize, Knob::Threads, Knob::WeightLayout};
  if (mode == "kv") return {Knob::KvType, Knob::BlockSize};
  if (mode == "prefix") return {Knob::KvType, Knob::BlockSize, Knob::PrefixCache, Knob::ChunkSize, Knob::Threads};
  if (mode == "trace") {
    return {Knob::KvType, Knob::BlockSize, Knob::KvRecent, Knob::PrefixCache, Knob::ChunkSize, Knob::PreemptMode, Knob::Threads};
  }
  return {};
}

Report run_ab(const BenchOptions& o) {
  const std::optional<Knob> knob = knob_from_name(o.knob);
  if (!knob) throw Error("unknown knob '" + o.knob + "'");
  Knobs arms[2] = {o.knobs, o.knobs};
  set_knob(arms[0], *knob, o.a);
  set_knob(arms[1], *knob, o.b);
  const Measure measure = make_measure(o);
  std::vector<std::string> names;
  std::map<std::string, MetricRuns> runs;
  for (int32_t pair = 0; pair < o.repeat && !stop_requested(); ++pair) {
    Metrics m[2];
    for (int arm = 0; arm < 2 && !stop_requested(); ++arm) {
      m[arm] = measure(arms[arm]);
      progress("ab pair " + std::to_string(pair + 1) + "/" + std::to_string(o.repeat) + " " + o.knob + "=" +
               (arm == 0 ? o.a : o.b) + ": " + m[arm].front().first + " " + format_number(m[arm].front().second, 2));
    }
    if (m[1].size() != m[0].size()) break;  // stopped between the arms: the pair is incomplete
    for (size_t i = 0; i < m[0].size(); ++i) {
      const auto& [name, a] = m[0][i];
      if (runs.find(name) == runs.end()) names.push_back(name);
      MetricRuns& r = runs[name];
      r.a.push_back(a);
      r.b.push_back(m[1][i].second);
      r.ratio.push_back(a != 0 ? m[1][i].second / a : 0);
    }
  }
  Report r;
  r.mode = "ab";
  r.partial = stop_requested();
  r.settings = {{"knob", o.knob},
                {"a", o.a},
                {"b", o.b},
                {"mode", o.ab_mode},
                {"pairs", o.repeat},
                {"seed", o.seed},
                {"fixed", knobs_json(o.knobs)}};
  r.settings["fixed"].erase(o.knob);
  Table t{o.knob + ": A = " + o.a + ", B = " + o.b + " (" + o.ab_mode + ")",
          {"metric", "A", "B", "B/A", "B/A per pair (min..max)"},
          {}};
  Plot p{"ratio", "B/A per metric (" + o.knob + " " + o.b + " vs " + o.a + ")", "", "B / A", {}, {{"B/A", {}, {}}}};
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : names) {
    const MetricRuns& m = runs[name];
    const Stats a = summarize(m.a), b = summarize(m.b), ratio = summarize(m.ratio);
    const double of_medians = a.median != 0 ? b.median / a.median : 0;
    t.rows.push_back({name, format_stats(a, 2), format_stats(b, 2), format_number(of_medians, 3),
                      format_number(ratio.min, 3) + ".." + format_number(ratio.max, 3)});
    p.categories.push_back(name);
    p.series[0].y.push_back(of_medians);
    rows.push_back({{"name", name},
                    {"a", stats_json(a)},
                    {"b", stats_json(b)},
                    {"ratio", of_medians},
                    {"ratio_min", ratio.min},
                    {"ratio_max", ratio.max},
                    {"pair_ratios", m.ratio}});
  }
  r.results["pairs_completed"] = names.empty() ? 0 : runs[names.front()].a.size();
  r.results["metrics"] = rows;
  r.tables.push_back(t);
  r.plots.push_back(p);
  r.notes.push_back(
      "Arms alternate A B A B in one process on the same inputs. B/A is the ratio of the medians; the "
      "per-pair range shows how far single comparisons scattered. A ratio range that straddles 1 "
      "means the difference is within this machine's noise.");
  return r;
}

}  // namespace kvdesk::bench
