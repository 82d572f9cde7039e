// How every kvdesk program reads its command line (CLI11): --help prints usage and exits 0; a
// usage error is one line saying what is wrong, then the usage line of the (sub)command the
// user chose, naming its required options, and exit status 2.
#pragma once
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace kvdesk {

// "Usage: kvdesk-cli generate -m,--model TEXT -p,--prompt TEXT [OPTIONS]  (kvdesk-cli generate
// --help for more)": the deepest subcommand the parse selected (even one whose options then
// failed), else the program itself.
std::string usage_line(const CLI::App& app, const std::string& program);

// Parses argv. The exit status to leave with now, or nullopt when the program should go on.
std::optional<int> parse_command_line(CLI::App& app, const std::string& program, int argc, char** argv);

}  // namespace kvdesk
