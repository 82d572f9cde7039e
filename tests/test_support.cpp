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

std::string vocab_test_path(const std::string& name) {
  const std::string path = models_dir() + "/../vocab-tests/" + name;
  INFO("tokenizer test set " << path << " (the vocab-tests folder beside KVDESK_MODELS_DIR)");
  REQUIRE(std::filesystem::exists(path));
  return path;
}

std::string source_path(const std::string& relative) { return std::string(KVDESK_SOURCE_DIR) + "/" + relative; }

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

ChildProcess::ChildProcess(const std::string& program, const std::vector<std::string>& args) {
  const std::string out_path = dir_.file("stdout");
  const std::string err_path = dir_.file("stderr");
  std::fflush(stdout);   // the child must not inherit (and print again) our buffered output
  std::fflush(stderr);
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    if (!std::freopen(out_path.c_str(), "w", stdout) || !std::freopen(err_path.c_str(), "w", stderr)) _exit(127);
    std::vector<std::string> all = {program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(program.c_str(), argv.data());
    _exit(127);
  }
}

std::string ChildProcess::stdout_so_far() const { return read_all(dir_.file("stdout")); }

std::string ChildProcess::stderr_so_far() const { return read_all(dir_.file("stderr")); }

CliRun ChildProcess::wait() {
  int status = 0;
  ::waitpid(pid_, &status, 0);
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = read_all(dir_.file("stdout"));
  run.err = read_all(dir_.file("stderr"));
  return run;
}

CliRun run_program(const std::string& program, const std::vector<std::string>& args) {
  return ChildProcess(program, args).wait();
}

CliRun run_cli(const std::vector<std::string>& args) { return run_program(KVDESK_CLI_PATH, args); }

}  // namespace kvdesk::test
