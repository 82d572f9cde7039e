// Tests of ui/kv_report: a remote server's figures by name, "unavailable" (never 0) where the
// server does not expose one, the app's serving line, and the report scripts write.
#include <catch2/catch.hpp>

#include <map>

#include "ui/kv_report.h"

using namespace kvdesk::ui;

namespace {

std::map<std::string, std::string> rows(const ServerStatsView& stats) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : server_stats_rows(stats)) out[name] = value;
  return out;
}

}  // namespace

TEST_CASE("server figures a server does not expose read unavailable, real zeros read 0", "[ui][kv_report]") {
  ServerStatsView llama;   // llama-server: usage and requests, no prefix cache or block figures
  llama.kind = "llama-server";
  llama.kv_usage = 0.25;
  llama.running = 0;
  llama.waiting = 2;
  const std::map<std::string, std::string> r = rows(llama);
  CHECK(r.at("server") == "llama-server");
  CHECK(r.at("KV cache used") == "25.0%");
  CHECK(r.at("running") == "0");
  CHECK(r.at("waiting") == "2");
  for (const char* hidden : {"KV tokens", "prefix cache hit rate", "preemptions", "block size", "blocks", "prompt tokens",
                             "generated tokens"}) {
    CHECK(r.at(hidden) == kUnavailable);
  }
  CHECK(rows(ServerStatsView{}).at("server") == kUnavailable);
}

TEST_CASE("the KV report names the engine, its blocks, the server's figures and the HTTP server", "[ui][kv_report]") {
  ViewModel vm;
  vm.model.name = "stories260K.gguf";
  CHECK(kv_report_text(vm) == "engine: in-process\nmodel: stories260K.gguf\nblocks: unavailable\n");

  vm.kv.valid = true;
  vm.kv.blocks_total = 64;
  vm.kv.blocks_used = 3;
  vm.kv.blocks_cached = 5;
  vm.kv.blocks_free = 56;
  vm.kv.block_size = 16;
  vm.remote.connected = true;
  vm.remote.url = "http://127.0.0.1:8080";
  vm.remote.stats_read = true;
  vm.remote.stats.kind = "kvdesk";
  vm.remote.stats.num_blocks = 64;
  vm.serve.on = true;
  vm.serve.url = "http://127.0.0.1:9000";
  vm.serve.running = 1;
  vm.serve.waiting = 2;
  vm.serve.served = 7;
  const std::string report = kv_report_text(vm);
  CHECK(report.find("engine: remote http://127.0.0.1:8080\n") == 0);
  CHECK(report.find("blocks: 64 total, 3 used, 5 cached, 56 free, 0 shared\n") != std::string::npos);
  CHECK(report.find("server server: kvdesk\n") != std::string::npos);
  CHECK(report.find("server blocks: 64\n") != std::string::npos);
  CHECK(report.find("server preemptions: unavailable\n") != std::string::npos);
  CHECK(report.find("serving on http://127.0.0.1:9000: 1 running, 2 waiting, 7 served\n") != std::string::npos);
  CHECK(serving_line(ServeView{}).empty());
}
