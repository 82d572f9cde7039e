// kvdesk-bench speed: prefill tok/s per prompt length and decode tok/s per context depth, per
// thread count, each the median of --repeat runs. Runs are interleaved (run r of every point
// before run r + 1), so a slow spell on a shared machine falls on all points alike. Each run
// also measures the machine's memory bandwidth (STREAM triad and read) per thread count, and
// decode is reported as bytes/s read (weights + KV per token x tok/s) and as the fraction of
// that bandwidth it reaches: decode is memory bound, so that fraction is its efficiency.
#include <algorithm>
#include <map>
#include <memory>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "app/bench/memory_bandwidth.h"
#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/model/model.h"
#include "engine/runtime/sync_driver.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::bench {
namespace {


// One greedy request through the engine step on this thread, EOS ignored.
RequestMetrics run_request(Model& model, ThreadPool& pool, const Knobs& k, KvCache& kv, std::vector<int32_t> prompt,
                           int32_t max_tokens) {
  CpuForward forward(model, pool);
  EngineCore core(model, forward, kv, SchedulerLimits{k.chunk_size, 1, k.preempt_mode});
  Request request;
  request.prompt_tokens = std::move(prompt);
  request.max_tokens = max_tokens;
  request.stop_at_eos = false;
  return complete(core, request).metrics;
}

// Pool blocks for a sequence of `tokens` positions with every layer group holding all of them:
// a sliding-window model's local layers keep blocks of their own (kv_layer_groups.h), and
// fill_context writes a whole context before a local group lets its old blocks go.
int32_t pool_blocks_for(const ModelConfig& c, int64_t tokens, int32_t block_size) {
  return kv_blocks_for(tokens, block_size) * kv_layer_groups(c).num_groups;
}

// Prompt tokens computed per second before the first token.
double prefill_tok_s(Model& model, ThreadPool& pool, const Knobs& k, const std::vector<int32_t>& prompt) {
  KvCacheConfig cache =
      bench_cache_config(k.kv_type, k.block_size, pool_blocks_for(model.config(), int64_t(prompt.size()) + 1, k.block_size));
  cache.layout.recent_rows = k.kv_recent;
  KvCache kv(model.config(), cache);
  return run_request(model, pool, k, kv, prompt, 1).prefill_tok_s;
}

// Greedy decode of n tokens after a context of depth tokens whose K/V rows were written directly
// (fill_context) and left in the prefix cache, so the request attaches them instead of
// prefilling: prefilling 4096 tokens on a laptop CPU would take longer than the figure it sets
// up, and decode cost does not depend on the values.
double decode_tok_s(Model& model, ThreadPool& pool, const Knobs& k, int32_t depth, int32_t n, uint64_t seed) {
  const ModelConfig& config = model.config();
  KvCacheConfig cache = bench_cache_config(k.kv_type, k.block_size, pool_blocks_for(config, depth + n + 1, k.block_size) + 1);
  cache.prefix_caching = true;
  cache.layout.recent_rows = k.kv_recent;
  KvCache kv(config, cache);
  Rng rng(seed);
  const SeqId seq = fill_context(kv, config, depth, rng);
  std::vector<int32_t> prompt = kv.tokens(seq);
  kv.free_sequence(seq);
  prompt.push_back(random_tokens(1, config.vocab_size, rng)[0]);
  return run_request(model, pool, k, kv, std::move(prompt), n + 1).decode_tok_s;
}

struct Plan {
  std::vector<int32_t> prompt_lens;
  std::vector<int32_t> depths;
  int32_t decode_tokens = 16;
};

Plan make_plan(const BenchOptions& o, const ModelConfig& config) {
  Plan p;
  p.decode_tokens = std::clamp(o.decode_tokens, 1, config.context_length - 1);
  p.prompt_lens = capped(o.prompt_lens, config.context_length - 1);
  p.depths = capped(o.depths, config.context_length - p.decode_tokens);
  return p;
}

std::unique_ptr<Model> load_model(const BenchOptions& o, const Knobs& k) {
  return Model::load(o.model_path, ModelLoadOptions{o.tokenizer_path, 0, k.cpu_layouts});
}

// First touch of the mapped weights and of the pool's threads, outside every timing.
void warm_up(Model& model, ThreadPool& pool, const Knobs& k, uint64_t seed) {
  Rng rng(seed);
  prefill_tok_s(model, pool, k,
                random_tokens(std::min(16, model.config().context_length - 1), model.config().vocab_size, rng));
}

using Samples = std::map<std::pair<int32_t, int32_t>, std::vector<double>>;  // (threads, length) -> runs

struct SpeedSamples {
  Samples prefill;
  Samples decode;
  std::map<int32_t, std::vector<Bandwidth>> bandwidth;  // threads -> runs
};

void measure_bandwidth_round(const BenchOptions& o, ThreadPool& pool, int32_t run, SpeedSamples& out) {
  if (o.bandwidth_mib == 0 || stop_requested()) return;
  constexpr int kPasses = 5;
  const Bandwidth b = measure_bandwidth(pool, size_t(o.bandwidth_mib) << 20, kPasses);
  out.bandwidth[pool.num_threads()].push_back(b);
  progress("speed run " + std::to_string(run + 1) + "/" + std::to_string(o.repeat) + " threads " +
           std::to_string(pool.num_threads()) + " memory bandwidth: triad " + format_number(b.triad_gb_s, 1) +
           " GB/s, read " + format_number(b.read_gb_s, 1) + " GB/s");
}

void measure_round(Model& model, const BenchOptions& o, const Plan& plan, int32_t run, SpeedSamples& out) {
  Samples& prefill = out.prefill;
  Samples& decode = out.decode;
  for (int32_t threads : o.thread_counts) {
    ThreadPool pool(threads);
    Knobs k = o.knobs;
    k.threads = threads;
    if (run == 0) warm_up(model, pool, k, o.seed);
    measure_bandwidth_round(o, pool, run, out);
    for (int32_t len : plan.prompt_lens) {
      if (stop_requested()) return;
      Rng rng(o.seed + uint64_t(len));
      const double v = prefill_tok_s(model, pool, k, random_tokens(len, model.config().vocab_size, rng));
      prefill[{threads, len}].push_back(v);
      progress("speed run " + std::to_string(run + 1) + "/" + std::to_string(o.repeat) + " threads " +
               std::to_string(threads) + " prefill " + std::to_string(len) + ": " + format_number(v, 1) + " tok/s");
    }
    for (int32_t depth : plan.depths) {
      if (stop_requested()) return;
      const double v = decode_tok_s(model, pool, k, depth, plan.decode_tokens, o.seed + uint64_t(depth));
      decode[{threads, depth}].push_back(v);
      progress("speed run " + std::to_string(run + 1) + "/" + std::to_string(o.repeat) + " threads " +
               std::to_string(threads) + " decode at depth " + std::to_string(depth) + ": " + format_number(v, 1) +
               " tok/s");
    }
  }
}

// One table (rows: lengths, columns: thread counts), its JSON rows and a line plot.
void add_figure(Report& r, const BenchOptions& o, const Samples& samples, const std::vector<int32_t>& lengths,
                const std::string& kind, const std::string& length_key, const std::string& length_label) {
  Table table{kind == "prefill" ? "Prefill tokens/s" : "Decode tokens/s", {length_label}, {}};
  Plot plot{kind, table.title + " (" + kv_type_name(o.knobs.kv_type) + " KV)", length_label, "tokens/s", {}, {}};
  nlohmann::json rows = nlohmann::json::array();
  for (int32_t t : o.thread_counts) {
    table.header.push_back(std::to_string(t) + (t == 1 ? " thread" : " threads"));
    plot.series.push_back(Series{std::to_string(t) + (t == 1 ? " thread" : " threads"), {}, {}});
  }
  for (int32_t len : lengths) {
    std::vector<std::string> row{std::to_string(len)};
    for (size_t i = 0; i < o.thread_counts.size(); ++i) {
      const auto it = samples.find({o.thread_counts[i], len});
      if (it == samples.end()) {
        row.push_back("-");
        continue;
      }
      const Stats s = summarize(it->second);
      row.push_back(format_stats(s, 1));
      plot.series[i].x.push_back(len);
      plot.series[i].y.push_back(s.median);
      rows.push_back({{"threads", o.thread_counts[i]}, {length_key, len}, {"tok_s", stats_json(s)}});
    }
    table.rows.push_back(row);
  }
  r.results[kind] = rows;
  r.tables.push_back(table);
  r.plots.push_back(plot);
}

// One figure (triad or read) of every run, summarized.
Stats bandwidth_stats(const std::vector<Bandwidth>& runs, double Bandwidth::*figure) {
  std::vector<double> v;
  for (const Bandwidth& b : runs) v.push_back(b.*figure);
  return summarize(v);
}

// Decode's bytes read per token at a depth, its GB/s at the median tok/s, and that as a
// fraction of the median triad and read bandwidth of the same thread count and runs.
void add_traffic(Report& r, const BenchOptions& o, const Model& model, const Plan& plan, const SpeedSamples& s) {
  if (s.bandwidth.empty()) return;
  const uint64_t weight_bytes = decode_weight_read_bytes(model.weights(), model.config());
  const size_t kv_per_token = kv_bytes_per_token(model.config(), o.knobs.kv_type, o.knobs.kv_type);
  Table table{"Decode memory traffic (weights + KV read per token x tok/s) vs measured bandwidth",
              {"context depth (tokens)", "MB read per token"}, {}};
  nlohmann::json rows = nlohmann::json::array();
  for (int32_t t : o.thread_counts) table.header.push_back(std::to_string(t) + (t == 1 ? " thread" : " threads"));
  for (int32_t depth : plan.depths) {
    const double bytes = double(weight_bytes) + double(depth) * double(kv_per_token);
    std::vector<std::string> row{std::to_string(depth), format_number(bytes / 1e6, 1)};
    for (int32_t t : o.thread_counts) {
      const auto decode = s.decode.find({t, depth});
      const auto bandwidth = s.bandwidth.find(t);
      if (decode == s.decode.end() || bandwidth == s.bandwidth.end()) {
        row.push_back("-");
        continue;
      }
      const double gb_s = bytes * summarize(decode->second).median / 1e9;
      const Stats triad_stats = bandwidth_stats(bandwidth->second, &Bandwidth::triad_gb_s);
      const Stats read_stats = bandwidth_stats(bandwidth->second, &Bandwidth::read_gb_s);
      const double triad = triad_stats.median;
      const double read = read_stats.median;
      row.push_back(format_number(gb_s, 1) + " GB/s = " + format_number(100 * gb_s / triad, 0) + "% of triad " +
                    format_number(triad, 1) + ", " + format_number(100 * gb_s / read, 0) + "% of read " +
                    format_number(read, 1));
      rows.push_back({{"threads", t},
                      {"depth", depth},
                      {"bytes_per_token", bytes},
                      {"decode_gb_s", gb_s},
                      {"triad_gb_s", stats_json(triad_stats)},
                      {"read_gb_s", stats_json(read_stats)},
                      {"fraction_of_triad", gb_s / triad},
                      {"fraction_of_read", gb_s / read}});
    }
    table.rows.push_back(row);
  }
  r.results["decode_traffic"] = rows;
  r.tables.push_back(table);
}

}  // namespace

Report run_speed(const BenchOptions& o) {
  std::unique_ptr<Model> model = load_model(o, o.knobs);
  const Plan plan = make_plan(o, model->config());
  Report r;
  r.mode = "speed";
  r.settings = {{"prompt_lens", plan.prompt_lens},
                {"depths", plan.depths},
                {"threads", o.thread_counts},
                {"decode_tokens", plan.decode_tokens},
                {"repeat", o.repeat},
                {"seed", o.seed},
                {"kv_type", kv_type_name(o.knobs.kv_type)},
                {"block_size", o.knobs.block_size},
                {"chunk_size", o.knobs.chunk_size},
                {"bandwidth_mib", o.bandwidth_mib}};
  SpeedSamples samples;
  for (int32_t run = 0; run < o.repeat && !stop_requested(); ++run) measure_round(*model, o, plan, run, samples);
  r.partial = stop_requested();
  add_figure(r, o, samples.prefill, plan.prompt_lens, "prefill", "prompt_tokens", "prompt tokens");
  add_figure(r, o, samples.decode, plan.depths, "decode", "depth", "context depth (tokens)");
  add_traffic(r, o, *model, plan, samples);
  r.notes.push_back("Prefill: the prompt's forward passes in chunks of " + std::to_string(o.knobs.chunk_size) +
                    " tokens, timed by the engine step. Decode: " + std::to_string(plan.decode_tokens) +
                    " greedy tokens one forward call each, after a context of the given depth whose K/V rows were "
                    "written directly (random values; decode cost does not depend on them). Lengths are capped at "
                    "the model's context.");
  if (!samples.bandwidth.empty()) {
    r.notes.push_back("Memory traffic: bytes read per decode token = every weight but the embedding table (one row "
                      "of it) + the context's K and V at that depth; GB/s = that x the median decode tok/s. The "
                      "machine's bandwidth is measured in the same runs with the same thread pool: STREAM triad "
                      "(a = b + s c over three " + std::to_string(o.bandwidth_mib) + " MiB arrays, 3 x 8 bytes per "
                      "element) and read (a sum over one array, decode's access pattern), best of 5 passes, median "
                      "over runs.");
  }
  return r;
}

Measure speed_measure(const BenchOptions& o) {
  // One model per weight layout, loaded when an arm first asks for it (outside the timings).
  auto models = std::make_shared<std::map<bool, std::shared_ptr<Model>>>();
  (*models)[o.knobs.cpu_layouts] = load_model(o, o.knobs);
  const Plan plan = make_plan(o, (*models)[o.knobs.cpu_layouts]->config());
  return [models, plan, o](const Knobs& k) {
    std::shared_ptr<Model>& model = (*models)[k.cpu_layouts];
    if (!model) model = load_model(o, k);
    ThreadPool pool(resolve_threads(k.threads));
    warm_up(*model, pool, k, o.seed);
    Metrics m;
    for (int32_t len : plan.prompt_lens) {
      Rng rng(o.seed + uint64_t(len));
      m.emplace_back("prefill_tok_s@" + std::to_string(len),
                     prefill_tok_s(*model, pool, k, random_tokens(len, model->config().vocab_size, rng)));
    }
    for (int32_t depth : plan.depths) {
      m.emplace_back("decode_tok_s@" + std::to_string(depth),
                     decode_tok_s(*model, pool, k, depth, plan.decode_tokens, o.seed + uint64_t(depth)));
    }
    return m;
  };
}

}  // namespace kvdesk::bench
