// Test helpers for kvdesk-bench: running it as a child process (optionally sending Ctrl-C once
// it has printed its first progress line) and reading the JSON it wrote.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/test_support.h"

namespace kvdesk::test {

// Runs kvdesk-bench with these arguments (passed as they are, no shell).
CliRun run_bench(const std::vector<std::string>& args);
// Same, but sends SIGINT once stderr shows a line containing `after` (or after 20 s).
CliRun run_bench_interrupted(const std::vector<std::string>& args, const std::string& after);

nlohmann::json read_json(const std::string& path);

}  // namespace kvdesk::test
