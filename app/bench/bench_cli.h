// kvdesk-bench's command line: one subcommand per mode, each registering the options of
// BenchOptions it reads, and the checks CLI11 cannot express (one value per knob; ab varies
// exactly one knob, which the mode must be able to vary).
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/bench/bench_options.h"

namespace kvdesk::bench {

struct ModeCommand {
  std::string mode;
  CLI::App* app = nullptr;
  std::shared_ptr<BenchOptions> options;
  // Knob flags as typed (-t 1,2 gives two values), applied after parsing.
  std::shared_ptr<std::map<Knob, std::vector<std::string>>> knob_flags;
  std::shared_ptr<std::vector<std::string>> ab_knobs;  // every --knob value
};

std::vector<ModeCommand> add_mode_commands(CLI::App& app);

// Applies the knob flags and the mode's defaults to command.options. Returns the usage
// problem (exit 2) when there is one.
std::optional<std::string> finish_options(ModeCommand& command);

}  // namespace kvdesk::bench
