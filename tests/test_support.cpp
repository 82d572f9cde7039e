// Test helpers (see test_support.h).
#include "tests/test_support.h"

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace kvdesk::test {

std::string models_dir() {
  if (const char* env = std::getenv("KVDESK_MODELS_DIR"); env && *env) return env;
  return KVDESK_MODELS_DIR;
}

std::string model_path(const std::string& name) {
  const std::string path = models_dir() + "/" + name;
  INFO("shared model file " << path << " (set KVDESK_MODELS_DIR to the folder that has it)");
  REQUIRE(std::filesystem::exists(path));
  return path;
}

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    std::ifstream in(model_path("stories260K.reference.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() / ("kvdesk-test-" + std::to_string(rd()) + std::to_string(::getpid()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CliRun run_cli(const std::vector<std::string>& args) {
  TempDir dir;
  const std::string out_path = dir.file("stdout");
  const std::string err_path = dir.file("stderr");
  std::fflush(stdout);   // the child must not inherit (and print again) our buffered output
  std::fflush(stderr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!std::freopen(out_path.c_str(), "w", stdout) || !std::freopen(err_path.c_str(), "w", stderr)) _exit(127);
    std::vector<char*> argv;
    std::string cli = KVDESK_CLI_PATH;
    argv.push_back(cli.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(cli.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = read_all(out_path);
  run.err = read_all(err_path);
  return run;
}

}  // namespace kvdesk::test
