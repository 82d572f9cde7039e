// kvdesk-bench grammar: what constrained decoding costs. The same request (a short prompt,
// --decode-tokens sampled at temperature 1, end-of-generation ignored) runs free and held to a
// JSON schema (--json-schema, or any JSON object), alternating --repeat times so a slow spell
// on a shared machine falls on all: free and held on one engine, as a server sees an agent
// that sends its schema with every request (the held request starts from the grammar tables
// the one before left), and held on a fresh engine, where the grammar's states, steps and
// masks are computed as the request goes. Reported: the median decode tok/s of each and the
// mask's cost per token (1/held - 1/free). The figures to hold: the mask under 5% of decode on
// stories260K and under 2% on a 32K-vocabulary model.
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"
#include "engine/kv/kv_cache.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/model/model.h"
#include "engine/runtime/sync_driver.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::bench {
namespace {

std::string schema_grammar(const BenchOptions& o) {
  if (o.json_schema_path.empty()) return grammar::json_object_gbnf();
  std::ifstream in(o.json_schema_path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const auto schema = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  if (schema.is_discarded()) throw Error(o.json_schema_path + " is not JSON");
  return grammar::json_schema_gbnf(schema);
}

// One engine for every run, sized for one request.
struct BenchEngine {
  BenchEngine(Model& model, ThreadPool& pool, const BenchOptions& o, int32_t tokens)
      : kv(model.config(), bench_cache_config(o.knobs.kv_type, o.knobs.block_size,
                                              kv_blocks_for(tokens, o.knobs.block_size) * kv_layer_groups(model.config()).num_groups + 1)),
        forward(model, pool),
        core(model, forward, kv, SchedulerLimits{}) {}
  KvCache kv;
  CpuForward forward;
  EngineCore core;
};

// Decode tok/s of one run; constraint empty: free.
double decode_tok_s(EngineCore& core, const std::vector<int32_t>& prompt, const BenchOptions& o,
                    const OutputConstraint& constraint, uint64_t seed) {
  Request request;
  request.prompt_tokens = prompt;
  request.max_tokens = o.decode_tokens;
  request.stop_at_eos = false;
  request.sampling.temperature = 1.0f;
  request.sampling.seed = seed;
  request.constraint = constraint;
  return complete(core, request).metrics.decode_tok_s;
}

}  // namespace

Report run_grammar(const BenchOptions& o) {
  std::unique_ptr<Model> model = Model::load(o.model_path, ModelLoadOptions{o.tokenizer_path, 0, o.knobs.cpu_layouts});
  ThreadPool pool(resolve_threads(o.knobs.threads));
  const std::string gbnf = schema_grammar(o);
  OutputConstraint constraint;
  constraint.grammar = grammar::parse_gbnf(gbnf);
  const std::vector<int32_t> prompt = model->tokenizer().encode("Once upon a time, there was a list:", true);
  const int32_t tokens = int32_t(prompt.size()) + o.decode_tokens + 1;
  BenchEngine engine(*model, pool, o, tokens);
  std::vector<double> free_runs, warm_runs, cold_runs;
  for (int r = 0; r < o.repeat && !stop_requested(); ++r) {
    progress("grammar: run " + std::to_string(r + 1) + " of " + std::to_string(o.repeat));
    const uint64_t seed = o.seed + uint64_t(r);
    free_runs.push_back(decode_tok_s(engine.core, prompt, o, {}, seed));
    const double held = decode_tok_s(engine.core, prompt, o, constraint, seed);
    if (r > 0) warm_runs.push_back(held);   // the first found no tables kept
    BenchEngine fresh(*model, pool, o, tokens);
    cold_runs.push_back(decode_tok_s(fresh.core, prompt, o, constraint, seed));
  }
  const Stats free = summarize(free_runs);
  const Stats warm = summarize(warm_runs.empty() ? cold_runs : warm_runs);
  const Stats cold = summarize(cold_runs);
  auto mask_us = [&](const Stats& held) { return held.median > 0 && free.median > 0 ? 1e6 / held.median - 1e6 / free.median : 0; };
  auto cost_pct = [&](const Stats& held) { return held.median > 0 ? (free.median / held.median - 1) * 100 : 0; };
  Report report;
  report.mode = "grammar";
  report.partial = stop_requested();
  report.settings = {{"decode_tokens", o.decode_tokens},
                     {"schema", o.json_schema_path.empty() ? "any JSON object" : o.json_schema_path},
                     {"threads", resolve_threads(o.knobs.threads)},
                     {"vocab", model->config().vocab_size}};
  report.results = {{"free_tok_s", stats_json(free)},
                    {"constrained_tok_s", stats_json(warm)},
                    {"mask_us_per_token", mask_us(warm)},
                    {"mask_cost_pct", cost_pct(warm)},
                    {"fresh_engine_tok_s", stats_json(cold)},
                    {"fresh_engine_mask_us_per_token", mask_us(cold)},
                    {"fresh_engine_mask_cost_pct", cost_pct(cold)}};
  Table table{"Decode tok/s, free and held to the schema (median, min..max)", {"request", "tok/s", "mask per token", "cost"}, {}};
  table.rows.push_back({"free", format_stats(free, 1), "", ""});
  table.rows.push_back({"held, the schema seen before", format_stats(warm, 1), format_number(mask_us(warm), 1) + " µs",
                        format_number(cost_pct(warm), 2) + "%"});
  table.rows.push_back({"held, a fresh engine", format_stats(cold, 1), format_number(mask_us(cold), 1) + " µs",
                        format_number(cost_pct(cold), 2) + "%"});
  report.tables.push_back(std::move(table));
  report.notes.push_back("Temperature 1, " + std::to_string(o.decode_tokens) + " tokens per run, end of generation ignored; " +
                         "a vocabulary of " + std::to_string(model->config().vocab_size) + " tokens.");
  return report;
}

}  // namespace kvdesk::bench
