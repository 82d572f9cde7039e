// Subcommands and their options (see bench_cli.h).
#include "app/bench/bench_cli.h"

#include <algorithm>

#include "app/bench/bench_modes.h"
#include "app/command_line.h"
#include "engine/error.h"

namespace kvdesk::bench {
namespace {

using KnobFlags = std::map<Knob, std::vector<std::string>>;

void add_common(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("-m,--model", o.model_path, "GGUF model file")->required();
  cmd->add_option("--tokenizer", o.tokenizer_path, "SentencePiece .model file to use instead of the GGUF vocabulary");
  add_backend_option(cmd, o.backend);
  cmd->add_option("--json", o.json_path, "Write the results as JSON to this file");
  cmd->add_option("--report", o.report_path, "Write a Markdown report (and its SVG plots beside it) to this file");
  cmd->add_option("--repeat", o.repeat, "Runs per figure (ab: A/B pairs); figures are medians")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the synthetic inputs")->capture_default_str();
}

// Knob flags, by knob name; values stay strings until finish_options.
void add_knob_flags(CLI::App* cmd, KnobFlags& flags, const std::vector<Knob>& knobs) {
  const std::map<Knob, std::string> help = {
      {Knob::KvType, "KV cache storage type (default f16)"},
      {Knob::BlockSize, "KV block size in tokens (default 16)"},
      {Knob::KvRecent, "Newest rows per sequence kept in f32 for fp8 / int8 / int4 KV (default 16; 0: none)"},
      {Knob::PrefixCache, "Prefix cache on or off (default on)"},
      {Knob::ChunkSize, "Prefill tokens per forward call / engine step token budget (default 256)"},
      {Knob::PreemptMode, "Preemption: recompute or swap (default recompute)"},
      {Knob::Threads, "CPU threads (default: all cores)"},
      {Knob::WeightLayout, "Weights repacked for the CPU kernels' GEMM at load (cpu, default) or as stored (ggml)"}};
  for (Knob k : knobs) {
    const std::string name = k == Knob::Threads ? "-t,--threads" : "--" + std::string(knob_name(k));
    cmd->add_option(name, flags[k], help.at(k))->delimiter(',');
  }
}

void add_kv_types(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--kv-types", o.kv_types, "KV types to compare, or all (default all)")->delimiter(',');
}

void add_speed(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--prompt-lens", o.prompt_lens, "Prompt lengths for prefill (capped at the context)")->delimiter(',');
  cmd->add_option("--depths", o.depths,
                  "Context depths for decode (ab --mode kv: for attention), capped at the context")
      ->delimiter(',');
  cmd->add_option("--decode-tokens", o.decode_tokens, "Tokens decoded per decode run")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
}

void add_capacity(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--kv-budget-mib", o.kv_budget_mib, "KV budget in MiB (default 256)")->check(positive_number());
  cmd->add_option("--block-sizes", o.block_sizes, "Paged block sizes")->delimiter(',')->capture_default_str();
  cmd->add_option("--len-median", o.lengths.median, "Median sequence length (default: context / 4)")
      ->check(positive_number());
  cmd->add_option("--len-sigma", o.lengths.sigma, "Log-normal sigma of the lengths")
      ->check(CLI::Range(0.0, 4.0))
      ->capture_default_str();
  cmd->add_option("--len-min", o.lengths.min, "Shortest length")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd->add_option("--len-max", o.lengths.max, "Longest length (default: the context)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--trace", o.trace_path, "Take the lengths from this chat trace instead");
}

void add_prefix(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--system-tokens", o.system_tokens, "Shared system prompt length (default: context / 4)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--user-tokens", o.user_tokens, "Tokens per user turn")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--answer-tokens", o.answer_tokens, "Tokens per answer")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
}

void add_engine(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--kv-budget-mib", o.kv_budget_mib, "KV pool size in MiB (default: the engine's)")
      ->check(positive_number());
  cmd->add_option("--max-running", o.max_running, "Most sequences in one batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
}

void add_conversations(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--conversations", o.conversations, "Conversations (prefix default 3, trace default 6)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--turns", o.turns, "User turns per conversation (prefix default 3, trace default 2)")
      ->check(CLI::Range(1, 1000));
}

void add_trace(CLI::App* cmd, BenchOptions& o) {
  ChatWorkload& w = o.workload;
  cmd->add_option("--trace", o.trace_path, "Chat trace to replay (JSON lines; default: synthetic from --seed)");
  cmd->add_option("--save-trace", o.save_trace, "Write the synthetic trace to this file");
  cmd->add_option("--system-prompts", w.system_prompts, "Distinct shared system prompts")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--system-words", w.system_words, "Words per system prompt (0: none)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--user-median", w.user_words.median, "Median words per user turn")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--answer-median", w.answer_tokens.median, "Median max_tokens per answer")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--arrival-rate", w.arrivals_per_s, "Conversation arrivals per second (Poisson; 0: all at once)")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_option("--think-ms", w.think_ms, "Mean pause between an answer and the next turn")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_option("--cost-per-hour", o.cost_per_hour,
                  "Machine cost per hour: adds cost per request and per 1K output tokens")
      ->check(non_negative_number());
}

void add_quality(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--text", o.text_path, "Text to score (default: assets/quality/tinystories_sample.txt)");
  cmd->add_option("--ctx", o.ctx, "Tokens per window (default: min(context, 512))")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--max-tokens", o.max_text_tokens, "Score at most this many tokens of the text")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--retention", o.retention_policies,
                  "Compare KV retention policies (sinks, h2o, snapkv or all) vs the full cache instead of KV types")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "sinks", "h2o", "snapkv", "all"}));
  cmd->add_option("--kv-keep", o.kv_keep, "Retention budgets: fractions (0.5, 50%) or token counts")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--retention-prompt", o.retention_prompt, "Prefilled tokens per window (default: a quarter)")
      ->check(CLI::Range(0, 1 << 20));
}

ModeCommand make_command(CLI::App& app, const std::string& mode, const std::string& help) {
  ModeCommand c{mode, app.add_subcommand(mode, help), std::make_shared<BenchOptions>(), std::make_shared<KnobFlags>(),
                std::make_shared<std::vector<std::string>>()};
  add_common(c.app, *c.options);
  return c;
}

// trace against a server: its model answers, so -m is needed only without --url.
void add_remote(CLI::App* cmd, BenchOptions& o) {
  cmd->add_option("--url", o.url, "Drive this OpenAI-compatible server (http://HOST:PORT) instead of -m's model");
  cmd->add_option("--api-key", o.api_key, "Bearer token for --url");
  cmd->get_option("--model")->required(false);
}

void add_ab(ModeCommand& c) {
  BenchOptions& o = *c.options;
  add_knob_flags(c.app, *c.knob_flags, {all_knobs().begin(), all_knobs().end()});
  add_speed(c.app, o);
  add_prefix(c.app, o);
  add_engine(c.app, o);
  add_conversations(c.app, o);
  add_trace(c.app, o);
  c.app
      ->add_option("--knob", *c.ab_knobs,
                   "The one knob to vary: kv-type, block-size, kv-recent, prefix-cache, chunk-size, "
                   "preempt-mode, threads or weight-layout")
      ->required()
      ->delimiter(',');
  c.app->add_option("--a", o.a, "The knob's value in arm A")->required();
  c.app->add_option("--b", o.b, "The knob's value in arm B")->required();
  c.app->add_option("--mode", o.ab_mode, "What to measure: speed, kv, prefix or trace")
      ->check(CLI::IsMember({"speed", "kv", "prefix", "trace"}))
      ->capture_default_str();
}

// ab's checks: one knob, known, that the mode varies, with no other flag setting it, and no
// other knob given several values.
std::optional<std::string> check_ab(ModeCommand& c, const KnobFlags& flags) {
  BenchOptions& o = *c.options;
  const std::vector<std::string>& knobs = *c.ab_knobs;
  if (knobs.size() != 1) {
    std::string list;
    for (const std::string& k : knobs) list += (list.empty() ? "" : ", ") + k;
    return "ab varies exactly one knob at a time; got " + std::to_string(knobs.size()) + " (" + list +
           "). Run one ab comparison per knob.";
  }
  o.knob = knobs[0];
  const std::optional<Knob> knob = knob_from_name(o.knob);
  if (!knob)
    return "unknown knob '" + o.knob +
           "' (choose kv-type, block-size, kv-recent, prefix-cache, chunk-size, preempt-mode, threads or weight-layout)";
  const std::vector<Knob> varies = knobs_of_mode(o.ab_mode);
  if (std::find(varies.begin(), varies.end(), *knob) == varies.end()) {
    return "the " + o.ab_mode + " mode does not depend on " + o.knob + "; choose another --mode";
  }
  for (const auto& [k, values] : flags) {
    if (values.empty()) continue;
    if (k == *knob) return o.knob + " is the knob under test: give its two values with --a and --b, not --" + o.knob;
    if (values.size() > 1) {
      return "--" + std::string(knob_name(k)) + " gives " + std::to_string(values.size()) +
             " values, which would vary a "
             "second knob besides " +
             o.knob + "; ab varies exactly one knob at a time";
    }
  }
  if (o.a == o.b) return "--a and --b are both '" + o.a + "': nothing to compare";
  try {
    Knobs probe;
    set_knob(probe, *knob, o.a);
    set_knob(probe, *knob, o.b);
  } catch (const Error& e) {
    return e.what();
  }
  return std::nullopt;
}

// The defaults a mode has that differ from BenchOptions' own.
void apply_mode_defaults(ModeCommand& c) {
  BenchOptions& o = *c.options;
  const auto given = [&](const char* name) { return c.app->count(name) > 0; };
  if (c.mode == "trace" && !given("--repeat")) o.repeat = 1;
  if (c.mode == "ab") {
    if (!given("--prompt-lens")) o.prompt_lens = {128};
    if (!given("--depths")) o.depths = {256};
    o.attn_depths = o.depths;
  }
}

std::optional<std::string> check_lengths(const BenchOptions& o) {
  const auto any = [](const std::vector<int32_t>& v, auto bad) { return std::any_of(v.begin(), v.end(), bad); };
  if (any(o.prompt_lens, [](int32_t n) { return n < 1; })) return "--prompt-lens must be at least 1";
  if (any(o.depths, [](int32_t n) { return n < 0; }) || any(o.attn_depths, [](int32_t n) { return n < 0; })) {
    return "--depths must not be negative";
  }
  if (any(o.block_sizes, [](int32_t b) { return b < 1 || b > 1024 || (b & (b - 1)) != 0; })) {
    return "--block-sizes must be powers of two up to 1024";
  }
  if (o.lengths.max > 0 && o.lengths.min > o.lengths.max) return "--len-min is above --len-max";
  return std::nullopt;
}

}  // namespace

std::vector<ModeCommand> add_mode_commands(CLI::App& app) {
  std::vector<ModeCommand> commands;
  ModeCommand speed = make_command(app, "speed", "Prefill tok/s per prompt length and decode tok/s per context depth");
  add_knob_flags(speed.app, *speed.knob_flags,
                 {Knob::KvType, Knob::BlockSize, Knob::KvRecent, Knob::ChunkSize, Knob::Threads, Knob::WeightLayout});
  add_speed(speed.app, *speed.options);
  speed.app
      ->add_option("--bandwidth-mib", speed.options->bandwidth_mib,
                   "MiB per array of the STREAM triad/read run that decode bytes/s are compared with (0: skip)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  commands.push_back(speed);

  ModeCommand kv = make_command(app, "kv", "Bytes per token per KV type, and attention time per decode token");
  add_knob_flags(kv.app, *kv.knob_flags, {Knob::BlockSize});
  add_kv_types(kv.app, *kv.options);
  kv.app->add_option("--depths", kv.options->attn_depths, "Context depths for attention (capped)")->delimiter(',');
  commands.push_back(kv);

  ModeCommand capacity = make_command(app, "capacity", "Sequences that fit a KV budget, and KV memory wasted");
  add_kv_types(capacity.app, *capacity.options);
  add_capacity(capacity.app, *capacity.options);
  commands.push_back(capacity);

  ModeCommand prefix =
      make_command(app, "prefix", "TTFT of multi-turn chats sharing a system prompt, prefix cache on vs off");
  add_knob_flags(prefix.app, *prefix.knob_flags, {Knob::KvType, Knob::BlockSize, Knob::ChunkSize, Knob::Threads});
  add_prefix(prefix.app, *prefix.options);
  add_engine(prefix.app, *prefix.options);
  add_conversations(prefix.app, *prefix.options);
  commands.push_back(prefix);

  ModeCommand quality =
      make_command(app, "quality", "Perplexity, KL divergence and top-1 agreement of each KV type vs f32");
  add_knob_flags(quality.app, *quality.knob_flags, {Knob::BlockSize, Knob::KvRecent, Knob::Threads});
  add_kv_types(quality.app, *quality.options);
  add_quality(quality.app, *quality.options);
  commands.push_back(quality);

  ModeCommand trace = make_command(app, "trace", "Replay a chat trace: requests/s, tok/s, TTFT, ITL, peak KV, cost");
  add_knob_flags(trace.app, *trace.knob_flags, knobs_of_mode("trace"));
  add_engine(trace.app, *trace.options);
  add_conversations(trace.app, *trace.options);
  add_trace(trace.app, *trace.options);
  add_remote(trace.app, *trace.options);
  commands.push_back(trace);

  ModeCommand resume = make_command(
      app, "resume", "TTFT of a new turn with the history cold, parked or from the database; bytes per saved conversation");
  add_knob_flags(resume.app, *resume.knob_flags, {Knob::KvType, Knob::BlockSize, Knob::ChunkSize, Knob::Threads});
  add_engine(resume.app, *resume.options);
  resume.app->add_option("--histories", resume.options->histories, "History lengths in tokens")
      ->delimiter(',')
      ->capture_default_str();
  resume.app->add_option("--turn-tokens", resume.options->turn_tokens, "Tokens of the new user turn")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  resume.app->add_option("--kv-types", resume.options->kv_types,
                         "KV types whose saved bytes are measured, or all (default f16,bf16,fp8_e4m3,int8,int4)")
      ->delimiter(',');
  commands.push_back(resume);

  ModeCommand templates = make_command(app, "templates", "Chat template render time for a typical conversation");
  templates.app->add_option("--templates", templates.options->templates_dir, "Also time each *.jinja file of this folder")
      ->check(CLI::ExistingDirectory);
  commands.push_back(templates);

  ModeCommand grammar = make_command(app, "grammar", "Decode tok/s free and under a JSON schema: the grammar mask's cost");
  add_knob_flags(grammar.app, *grammar.knob_flags, {Knob::Threads});
  grammar.app->add_option("--json-schema", grammar.options->json_schema_path, "The schema (default: any JSON object)")
      ->check(CLI::ExistingFile);
  grammar.app->add_option("--decode-tokens", grammar.options->decode_tokens, "Tokens decoded per run")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  commands.push_back(grammar);

  ModeCommand ab = make_command(app, "ab", "A/B of one knob: arms alternate A B A B on the same inputs");
  add_ab(ab);
  commands.push_back(ab);
  return commands;
}

std::optional<std::string> finish_options(ModeCommand& c) {
  BenchOptions& o = *c.options;
  KnobFlags& flags = *c.knob_flags;
  if (c.mode == "ab") {
    if (std::optional<std::string> problem = check_ab(c, flags)) return problem;
  }
  for (auto& [k, values] : flags) {
    if (values.empty()) continue;
    if (k == Knob::Threads && c.mode == "speed") {
      o.thread_counts.clear();
      for (const std::string& v : values) {
        Knobs probe;
        try {
          set_knob(probe, k, v);
        } catch (const Error& e) {
          return e.what();
        }
        o.thread_counts.push_back(probe.threads);
      }
      continue;
    }
    if (values.size() > 1) return "--" + std::string(knob_name(k)) + " takes one value in the " + c.mode + " mode";
    try {
      set_knob(o.knobs, k, values[0]);
    } catch (const Error& e) {
      return e.what();
    }
  }
  try {
    parse_kv_types(o.kv_types);
  } catch (const Error& e) {
    return e.what();
  }
  apply_mode_defaults(c);
  if (o.model_path.empty() && o.url.empty()) return "--model is required (or --url, to drive a server)";
  return check_lengths(o);
}

}  // namespace kvdesk::bench
