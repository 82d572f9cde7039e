// kvdesk-cli serve: a local OpenAI-compatible HTTP server on the in-process engine. Binds
// first and prints "listening on http://HOST:PORT" (the port chosen for --port 0), then loads
// the model (/health answers 503 until it is in). SIGINT or SIGTERM stops it; a model that
// fails to load ends it with exit status 1.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "app/cli/cli_common.h"
#include "app/server/http_server.h"
#include "app/server/prometheus_metrics.h"
#include "app/server/request_router.h"
#include "engine/engine.h"

namespace kvdesk::cli {
namespace {

struct ServeArgs {
  ModelArgs model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int max_queue = 64;
  int max_running = 32;
  int step_tokens = 256;
  ChatTemplateArgs chat_template;   // neither: the model's own
  bool no_prefix_cache = false;
};

EngineSettings engine_settings(const ServeArgs& a) {
  EngineSettings s = engine_settings(a.model, a.chat_template);
  s.prefix_caching = !a.no_prefix_cache;
  s.scheduler.max_running = a.max_running;
  s.scheduler.step_token_budget = a.step_tokens;
  return s;
}

server::ServeOptions serve_options(const ServeArgs& a) {
  server::ServeOptions o;
  o.host = a.host;
  o.port = a.port;
  o.api_key = a.api_key;
  // Every request in flight holds a connection's thread; 8 more for probes (/health, /metrics).
  o.http_threads = std::min(a.max_queue, 504) + 8;
  o.model_id = std::filesystem::path(a.model.model_path).filename().string();
  return o;
}

// SIGINT and SIGTERM blocked in every thread started from here on; the main thread takes
// them with sigtimedwait. SIGPIPE (a client gone mid-write) is ignored: the write fails instead.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return set;
}

// Waits for a stop signal while watching the model load. Returns the exit status.
int serve_until_stopped(const sigset_t& signals, server::RequestRouter& router, const std::string& model_path) {
  bool announced = false;
  for (;;) {
    const timespec tick{0, 200'000'000};
    if (sigtimedwait(&signals, nullptr, &tick) > 0) return 0;
    const server::ModelState state = router.model_state();
    if (state == server::ModelState::Failed) throw Error(router.load_error());
    if (state == server::ModelState::Loaded && !announced) {
      std::fprintf(stderr, "kvdesk-cli serve: %s loaded\n", model_path.c_str());
      announced = true;
    }
  }
}

int run_serve(const ServeArgs& a) {
  if (!server::is_loopback_host(a.host) && a.api_key.empty()) {
    throw UsageError("serving on '" + a.host + "', which other machines can reach, needs --api-key");
  }
  const EngineSettings settings = engine_settings(a);
  const sigset_t signals = block_stop_signals();
  server::Doorbell doorbell;
  Engine engine([&doorbell] { doorbell.ring(); });
  server::ServingMetrics metrics;
  server::RequestRouter router(engine, doorbell, metrics, a.max_queue);
  server::HttpServer http(engine, router, metrics, serve_options(a));
  const int port = http.bind();
  std::thread listener([&http] { http.listen(); });
  std::printf("listening on %s\n", server::server_url(a.host, port).c_str());
  std::fflush(stdout);
  engine.load_model(settings);
  int status = 1;
  try {
    status = serve_until_stopped(signals, router, a.model.model_path);
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  router.cancel_all();
  http.stop();
  listener.join();
  return status;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  add_model_options(cmd, args->model);
  add_kv_options(cmd, args->model);
  cmd->add_option("--host", args->host, "Address to listen on (not loopback: needs --api-key)")->capture_default_str();
  cmd->add_option("--port", args->port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--max-queue", args->max_queue, "Most requests in flight; more get 503")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--max-running", args->max_running, "Most sequences in one batch")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--step-tokens", args->step_tokens, "Token budget per engine step (chunked prefill)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  add_chat_template_options(cmd, args->chat_template);
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "Turn the prefix cache off");
  return Command{cmd, [args] { return run_serve(*args); }};
}

}  // namespace kvdesk::cli
