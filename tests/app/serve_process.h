// A `kvdesk-cli serve` child process on a free loopback port, for the tests that talk HTTP to
// it (the server's own tests, the remote engine's). Started with stories260K and waited for
// until /health answers; stopped (SIGTERM, then SIGKILL) when the object goes.
#pragma once
#include <catch2/catch.hpp>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_support.h"

namespace kvdesk::test {

// A running `kvdesk-cli serve -m stories260K.gguf --port 0` (plus extra arguments) whose model
// has loaded.
class ServeProcess {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kStartTimeout = std::chrono::seconds(30);

  explicit ServeProcess(const std::vector<std::string>& extra = {}) : child_(KVDESK_CLI_PATH, arguments(extra)) {
    port_ = read_port();
    wait_until_healthy();
  }
  ~ServeProcess() { stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  httplib::Client client(const std::string& api_key = {}) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(60, 0);
    c.set_write_timeout(10, 0);
    if (!api_key.empty()) c.set_default_headers({{"Authorization", "Bearer " + api_key}});
    return c;
  }

  // SIGTERM, then SIGKILL if it has not left after 10 s. Returns the exit code (128 + signal).
  int stop() {
    if (exit_code_ >= 0) return exit_code_;
    ::kill(child_.pid(), SIGTERM);
    int status = 0;
    for (auto deadline = Clock::now() + std::chrono::seconds(10); Clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
      if (::waitpid(child_.pid(), &status, WNOHANG) == child_.pid()) return exit_code_ = exit_code_of(status);
    }
    ::kill(child_.pid(), SIGKILL);
    ::waitpid(child_.pid(), &status, 0);
    return exit_code_ = exit_code_of(status);
  }

 private:
  static std::vector<std::string> arguments(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"serve", "-m", model_path("stories260K.gguf"), "--port", "0", "-t", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  static int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

  int read_port() {
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)\n");
    for (auto deadline = Clock::now() + kStartTimeout; Clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
      std::smatch m;
      const std::string out = child_.stdout_so_far();
      if (std::regex_search(out, m, listening)) return std::stoi(m[1]);
      int status = 0;
      if (::waitpid(child_.pid(), &status, WNOHANG) == child_.pid()) {
        exit_code_ = exit_code_of(status);
        FAIL("kvdesk-cli serve exited with " << exit_code_ << ": " << child_.stderr_so_far());
      }
    }
    stop();
    FAIL("kvdesk-cli serve printed no port: " << child_.stderr_so_far());
    return 0;
  }

  void wait_until_healthy() {
    httplib::Client c = client();
    for (auto deadline = Clock::now() + kStartTimeout; Clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
      const auto res = c.Get("/health");
      if (res && res->status == 200) return;
    }
    stop();
    FAIL("kvdesk-cli serve never became healthy: " << child_.stderr_so_far());
  }

  ChildProcess child_;
  int port_ = 0;
  int exit_code_ = -1;   // >= 0 once the child was reaped
};

}  // namespace kvdesk::test
