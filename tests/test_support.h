// Test helpers: where the shared models are (KVDESK_MODELS_DIR, from the environment or the
// build), a scratch folder per test, and running kvdesk-cli as a child process. A missing
// model fails the test loudly; nothing is downloaded.
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace kvdesk::test {

std::string models_dir();
// Full path of a file in the models folder; fails the current test when it is missing.
std::string model_path(const std::string& name);
// Full path of a file in the tokenizer test sets, the vocab-tests folder next to the models
// folder; fails the current test when it is missing.
std::string vocab_test_path(const std::string& name);
// Full path of a file of this repository (assets, test fixtures) from its repository path.
std::string source_path(const std::string& relative);
const nlohmann::json& reference();   // stories260K.reference.json

// A fresh empty folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A child process running program (a path, or a name found in PATH) with these arguments,
// passed as they are (no shell), its stdout and stderr going to files in its own TempDir.
class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args);
  int pid() const { return pid_; }
  std::string stdout_so_far() const;
  std::string stderr_so_far() const;
  CliRun wait();   // exit code (128 + signal when killed) and everything it printed

 private:
  TempDir dir_;
  int pid_ = -1;
};

CliRun run_program(const std::string& program, const std::vector<std::string>& args);
// Runs kvdesk-cli with these arguments.
CliRun run_cli(const std::vector<std::string>& args);

}  // namespace kvdesk::test
