// kvdesk-bench child processes for tests (see bench_test_support.h).
#include "tests/app/bench/bench_test_support.h"

#include <signal.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

namespace kvdesk::test {

CliRun run_bench(const std::vector<std::string>& args) { return run_program(KVDESK_BENCH_PATH, args); }

CliRun run_bench_interrupted(const std::vector<std::string>& args, const std::string& after) {
  ChildProcess child(KVDESK_BENCH_PATH, args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (child.stderr_so_far().find(after) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(child.pid(), SIGINT);
  return child.wait();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  INFO("JSON report " << path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace kvdesk::test
