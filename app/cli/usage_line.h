// The usage line of the (sub)command a command line chose, for the one-line usage errors of
// kvdesk-cli and kvdesk-bench: "Usage: kvdesk-cli generate [OPTIONS]", naming the required
// options, so a bad command line always says how a good one looks.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace kvdesk::cli {

// `program` is the executable's name; the deepest subcommand the parse selected (even one whose
// options then failed) is described, else the program itself.
std::string usage_line(const CLI::App& app, const std::string& program);

}  // namespace kvdesk::cli
