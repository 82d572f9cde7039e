// kvdesk-cli replay: plays a chat trace (app/replay/trace.h) through the engine in real time
// and prints each turn's figures and a summary.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "app/cli/cli_common.h"
#include "app/replay/replayer.h"

namespace kvdesk::cli {
namespace {

struct ReplayArgs {
  ModelArgs model;
  std::string remote;    // an OpenAI-compatible server instead of the model
  std::string api_key;
  std::string trace_path;
  int kv_blocks = 0;
  int step_tokens = 256;
  int max_running = 32;
  std::string preempt = "recompute";
  ChatTemplateArgs chat_template;   // neither: the model's own
  bool no_prefix_cache = false;
  bool json = false;
  RetentionArgs retention;
};

EngineSettings engine_settings(const ReplayArgs& a) {
  EngineSettings s = engine_settings(a.model, a.chat_template);
  s.kv.num_blocks = a.kv_blocks;
  s.prefix_caching = !a.no_prefix_cache;
  s.scheduler.step_token_budget = a.step_tokens;
  s.scheduler.max_running = a.max_running;
  s.scheduler.preempt_mode = a.preempt == "swap" ? PreemptMode::Swap : PreemptMode::Recompute;
  return s;
}

int run_replay(const ReplayArgs& a) {
  if (a.model.model_path.empty() == a.remote.empty()) throw UsageError("give either --model or --remote");
  Replayer replayer(read_trace(a.trace_path), retention_options(a.retention));
  if (a.remote.empty()) {
    replayer.run(engine_settings(a));
  } else {
    replayer.run(remote::RemoteOptions{a.remote, a.api_key});
  }
  const nlohmann::json report = replayer.report_json();
  const std::string note = report["backend_note"].get<std::string>();
  if (!note.empty()) std::fprintf(stderr, "kvdesk-cli: %s\n", note.c_str());
  if (a.json) {
    std::printf("%s\n", report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  for (const auto& t : report["turns"]) {
    std::printf("[%s #%d %s] %d prompt (%d cached) ttft %.1f ms %.1f tok/s, %llu CoW copies, %llu forks: %s\n",
                t["conversation"].get<std::string>().c_str(), t["turn"].get<int>(), t["kind"].get<std::string>().c_str(),
                t["prompt_tokens"].get<int>(), t["cached_tokens"].get<int>(), t["ttft_ms"].get<double>(),
                t["decode_tok_s"].get<double>(), t["cow_copies"].get<unsigned long long>(),
                t["forks"].get<unsigned long long>(), t["text"].get<std::string>().c_str());
  }
  std::printf("summary: %s\n", report["summary"].dump().c_str());
  return 0;
}

}  // namespace

Command add_replay_command(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay a chat trace (JSON lines) through the engine");
  add_model_options(cmd, args->model);
  add_kv_options(cmd, args->model);
  add_retention_options(cmd, args->retention);
  cmd->get_option("--model")->required(false);
  cmd->add_option("--remote", args->remote, "Replay against this OpenAI-compatible server (http://HOST:PORT) instead of --model");
  cmd->add_option("--api-key", args->api_key, "Bearer token for --remote");
  cmd->add_option("--trace", args->trace_path, "Trace file, one JSON object per user turn")->required();
  cmd->add_option("--kv-blocks", args->kv_blocks, "KV pool size in blocks (default: from memory)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--step-tokens", args->step_tokens, "Token budget per engine step (chunked prefill)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  cmd->add_option("--max-running", args->max_running, "Most sequences in one batch")->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--preempt", args->preempt, "Preemption mode: recompute or swap")
      ->check(CLI::IsMember({"recompute", "swap"}))->capture_default_str();
  add_chat_template_options(cmd, args->chat_template);
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "Turn the prefix cache off");
  cmd->add_flag("--json", args->json, "Print the per-turn results and a summary as JSON");
  return Command{cmd, [args] { return run_replay(*args); }};
}

}  // namespace kvdesk::cli
