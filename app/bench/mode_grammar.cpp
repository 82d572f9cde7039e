// kvdesk-bench grammar: what constrained decoding costs. The same request (a short prompt,
// --decode-tokens sampled at temperature 1, end-of-generation ignored) runs free and held to a
// JSON schema (--json-schema, or any JSON object), the two alternating --repeat times on one
// engine, as a server sees an agent that sends its schema with every request, so a slow spell
// on a shared machine falls on both; reported: the median decode tok/s of each, their ratio,
// and the mask's cost per token (1/constrained - 1/free). The first constrained request finds
// the grammar's states, steps and masks still to compute; the later ones start from the tables
// the one before left (EngineCore keeps them), so the first is reported on its own row. The
// figures to hold: the mask under 5% of decode on stories260K and under 2% on a 32K-vocabulary
// model.
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
  BenchEngine engine(*model, pool, o, int32_t(prompt.size()) + o.decode_tokens + 1);
  std::vector<double> free_runs, held_runs;
  double first_held = 0;
  for (int r = 0; r < o.repeat && !stop_requested(); ++r) {
    progress("grammar: run " + std::to_string(r + 1) + " of " + std::to_string(o.repeat));
    free_runs.push_back(decode_tok_s(engine.core, prompt, o, {}, o.seed + uint64_t(r)));
    const double held = decode_tok_s(engine.core, prompt, o, constraint, o.seed + uint64_t(r));
    if (r == 0) {
      first_held = held;
    } else {
      held_runs.push_back(held);
    }
  }
  if (held_runs.empty()) held_runs.push_back(first_held);
  const Stats free = summarize(free_runs);
  const Stats held = summarize(held_runs);
  const double mask_us = held.median > 0 && free.median > 0 ? (1e6 / held.median - 1e6 / free.median) : 0;
  const double cost_pct = free.median > 0 ? (free.median / held.median - 1) * 100 : 0;
  Report report;
  report.mode = "grammar";
  report.partial = stop_requested();
  report.settings = {{"decode_tokens", o.decode_tokens},
                     {"schema", o.json_schema_path.empty() ? "any JSON object" : o.json_schema_path},
                     {"threads", resolve_threads(o.knobs.threads)},
                     {"vocab", model->config().vocab_size}};
  const double first_cost_pct = first_held > 0 && free.median > 0 ? (free.median / first_held - 1) * 100 : 0;
  report.results = {{"free_tok_s", stats_json(free)},
                    {"constrained_tok_s", stats_json(held)},
                    {"mask_us_per_token", mask_us},
                    {"mask_cost_pct", cost_pct},
                    {"first_constrained_tok_s", first_held},
                    {"first_mask_cost_pct", first_cost_pct}};
  report.tables.push_back(Table{"Decode tok/s, free and held to the schema (median, min..max)",
                                {"free", "constrained", "mask per token", "cost"},
                                {{format_stats(free, 1), format_stats(held, 1), format_number(mask_us, 1) + " µs",
                                  format_number(cost_pct, 2) + "%"}}});
  report.tables.push_back(Table{"The first constrained request (its grammar's tables computed as it goes)",
                                {"free (median)", "constrained", "cost"},
                                {{format_number(free.median, 1), format_number(first_held, 1), format_number(first_cost_pct, 2) + "%"}}});
  report.notes.push_back("Temperature 1, " + std::to_string(o.decode_tokens) + " tokens per run, end of generation ignored; " +
                         "a vocabulary of " + std::to_string(model->config().vocab_size) + " tokens.");
  return report;
}

}  // namespace kvdesk::bench
