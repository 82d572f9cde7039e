// kvdesk-cli generate: continue a prompt, streaming the text; --json prints one object with
// the tokens, the request's metrics (the same figures replay reports, from the same engine
// step) and the KV cache's statistics instead.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "app/cli/cli_common.h"
#include "app/replay/metrics_json.h"
#include "app/server/kv_json.h"
#include "engine/error.h"

namespace kvdesk::cli {
namespace {

struct GenerateArgs {
  ModelArgs model;
  std::string prompt;
  int max_tokens = 64;
  SamplingArgs sampling;
  bool json = false;
  bool no_bos = false;
  RetentionArgs retention;
};

// The request's one conversation key: its sequence stays parked when it finishes, so the KV
// statistics show the cache as generation ended.
constexpr uint64_t kConversation = 1;

// The KV cache as generation ended (its sequence still held): occupancy, waste, sharing.
nlohmann::json kv_json(const KvSnapshot& kv, const RequestMetrics& m) {
  nlohmann::json j = server::kv_snapshot_json(kv);
  j["peak_blocks"] = m.peak_blocks;
  return j;
}

nlohmann::json result_json(const std::vector<int32_t>& prompt, const Completion& r, const GenerateArgs& a,
                           const Session& s) {
  nlohmann::json j = metrics_json(r.metrics);
  j["prompt_ids"] = prompt;
  j["tokens"] = r.tokens;
  j["text"] = r.text;
  j["finish_reason"] = finish_reason_name(r.finish);
  j["seed"] = a.sampling.params.seed;
  j["threads"] = s.pool->num_threads();
  j["kv_type"] = a.model.kv_type;
  j["block_size"] = a.model.block_size;
  j["retention"] = a.retention.policy;
  j["kv_keep"] = a.retention.keep;
  j["kv"] = kv_json(s.kv->snapshot(), r.metrics);
  return j;
}

int run_generate(GenerateArgs& a) {
  const SamplingParams sampling = resolve_sampling(a.sampling);
  RetentionOptions retention;
  try {
    retention = retention_options(a.retention);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  Session s = open_session(a.model);
  const std::vector<int32_t> prompt = encode_prompt(*s.model, a.prompt, !a.no_bos);
  size_kv_cache(s, a.model, int32_t(prompt.size()) + a.max_tokens);
  Request request;
  request.prompt_tokens = prompt;
  request.max_tokens = a.max_tokens;
  request.sampling = sampling;
  request.retention = retention;
  request.conversation_key = kConversation;
  TokenCallback print;
  if (!a.json) {
    print = [](int32_t, const std::string& text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  const Completion r = complete(*s.core, request, print);
  if (a.json) {
    std::printf("%s\n", result_json(prompt, r, a, s).dump().c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr, "[%d prompt tokens (%d cached), %d generated, ttft %.1f ms, %.2f tok/s, %s]\n",
                 r.metrics.prompt_tokens, r.metrics.cached_tokens, r.metrics.generated_tokens, r.metrics.ttft_ms,
                 r.metrics.decode_tok_s, finish_reason_name(r.finish));
  }
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt");
  add_model_options(cmd, args->model);
  add_kv_options(cmd, args->model);
  add_retention_options(cmd, args->retention);
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text")->required();
  cmd->add_option("-n,--max-tokens", args->max_tokens, "Tokens to generate")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  add_sampling_options(cmd, args->sampling);
  cmd->add_flag("--no-bos", args->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--json", args->json, "Print one JSON object with tokens and timings");
  return Command{cmd, [args] { return run_generate(*args); }};
}

}  // namespace kvdesk::cli
