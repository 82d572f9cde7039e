// kvdesk-bench child processes for tests (see bench_test_support.h).
#include "tests/app/bench/bench_test_support.h"

#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

namespace kvdesk::test {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t spawn(const std::vector<std::string>& args, const std::string& out_path, const std::string& err_path) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!std::freopen(out_path.c_str(), "w", stdout) || !std::freopen(err_path.c_str(), "w", stderr)) _exit(127);
    std::string bench = KVDESK_BENCH_PATH;
    std::vector<std::string> copy = args;
    std::vector<char*> argv{bench.data()};
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bench.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

CliRun finish(pid_t pid, const std::string& out_path, const std::string& err_path) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = read_all(out_path);
  run.err = read_all(err_path);
  return run;
}

}  // namespace

CliRun run_bench(const std::vector<std::string>& args) {
  TempDir dir;
  const pid_t pid = spawn(args, dir.file("stdout"), dir.file("stderr"));
  return finish(pid, dir.file("stdout"), dir.file("stderr"));
}

CliRun run_bench_interrupted(const std::vector<std::string>& args, const std::string& after) {
  TempDir dir;
  const pid_t pid = spawn(args, dir.file("stdout"), dir.file("stderr"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (read_all(dir.file("stderr")).find(after) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGINT);
  return finish(pid, dir.file("stdout"), dir.file("stderr"));
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  INFO("JSON report " << path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace kvdesk::test
