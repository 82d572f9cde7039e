// kvdesk-bench speed: prefill tok/s per prompt length and decode tok/s per context depth, per
// thread count, each the median of --repeat runs. Runs are interleaved (run r of every point
// before run r + 1), so a slow spell on a shared machine falls on all points alike.
#include <algorithm>
#include <map>
#include <memory>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/error.h"
#include "engine/generator.h"
#include "engine/model.h"
#include "engine/thread_pool.h"

namespace kvdesk::bench {
namespace {

using Clock = std::chrono::steady_clock;

double prefill_tok_s(Model& model, ThreadPool& pool, const Knobs& k, const std::vector<int32_t>& prompt) {
  KvCache kv(model.config(),
             bench_cache_config(k.kv_type, k.block_size, blocks_for(int64_t(prompt.size()) + 1, k.block_size)));
  Generator generator(model, kv, pool);
  GenerateOptions o;
  o.max_tokens = 1;
  o.prefill_chunk = k.chunk_size;
  o.stop_at_eos = false;
  return generator.generate(prompt, o).prefill_tok_s();
}

// Greedy decode of n tokens after a context of depth tokens whose K/V rows were written directly
// (fill_context): prefilling 4096 tokens on a laptop CPU would take longer than the figure it
// sets up, and decode cost does not depend on the values.
double decode_tok_s(Model& model, ThreadPool& pool, const Knobs& k, int32_t depth, int32_t n, uint64_t seed) {
  const ModelConfig& config = model.config();
  KvCache kv(config, bench_cache_config(k.kv_type, k.block_size, blocks_for(depth + n, k.block_size)));
  Rng rng(seed);
  const SeqId seq = fill_context(kv, config, depth, rng);
  int32_t token = random_tokens(1, config.vocab_size, rng)[0];
  std::vector<float> logits;
  const auto start = Clock::now();
  for (int32_t i = 0; i < n; ++i) {
    const bool appended = kv.append(seq, std::span<const int32_t>(&token, 1));
    KVDESK_ASSERT(appended);
    ForwardBatch batch;
    batch.add(token, depth + i, seq, true);
    model.forward(batch, kv, pool, logits);
    kv.mark_computed(seq, depth + i + 1);
    token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const double ms = ms_since(start);
  return ms > 0 ? double(n) * 1000.0 / ms : 0;
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

std::unique_ptr<Model> load_model(const BenchOptions& o) {
  return Model::load(o.model_path, ModelLoadOptions{o.tokenizer_path});
}

// First touch of the mapped weights and of the pool's threads, outside every timing.
void warm_up(Model& model, ThreadPool& pool, const Knobs& k, uint64_t seed) {
  Rng rng(seed);
  prefill_tok_s(model, pool, k,
                random_tokens(std::min(16, model.config().context_length - 1), model.config().vocab_size, rng));
}

using Samples = std::map<std::pair<int32_t, int32_t>, std::vector<double>>;  // (threads, length) -> runs

void measure_round(Model& model, const BenchOptions& o, const Plan& plan, int32_t run, Samples& prefill,
                   Samples& decode) {
  for (int32_t threads : o.thread_counts) {
    ThreadPool pool(threads);
    Knobs k = o.knobs;
    k.threads = threads;
    if (run == 0) warm_up(model, pool, k, o.seed);
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

}  // namespace

Report run_speed(const BenchOptions& o) {
  std::unique_ptr<Model> model = load_model(o);
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
                {"chunk_size", o.knobs.chunk_size}};
  Samples prefill, decode;
  for (int32_t run = 0; run < o.repeat && !stop_requested(); ++run)
    measure_round(*model, o, plan, run, prefill, decode);
  r.partial = stop_requested();
  add_figure(r, o, prefill, plan.prompt_lens, "prefill", "prompt_tokens", "prompt tokens");
  add_figure(r, o, decode, plan.depths, "decode", "depth", "context depth (tokens)");
  r.notes.push_back("Prefill: the prompt's forward passes in chunks of " + std::to_string(o.knobs.chunk_size) +
                    " tokens, timed by the Generator. Decode: " + std::to_string(plan.decode_tokens) +
                    " greedy tokens one forward call each, after a context of the given depth whose K/V rows were "
                    "written directly (random values; decode cost does not depend on them). Lengths are capped at "
                    "the model's context.");
  return r;
}

Measure speed_measure(const BenchOptions& o) {
  std::shared_ptr<Model> model = load_model(o);
  const Plan plan = make_plan(o, model->config());
  return [model, plan, o](const Knobs& k) {
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
