// usage_line: CLI11's usage for the selected subcommand plus its required options.
#include "app/cli/usage_line.h"

namespace kvdesk::cli {

std::string usage_line(const CLI::App& app, const std::string& program) {
  const CLI::App* chosen = &app;
  std::string name = program;
  while (!chosen->get_subcommands().empty()) {
    chosen = chosen->get_subcommands().front();
    name += " " + chosen->get_name();
  }
  std::string line = "Usage: " + name;
  for (const CLI::Option* option : chosen->get_options()) {
    if (option->get_required()) line += " " + option->get_name(false, true) + " " + option->get_type_name();
  }
  if (chosen == &app) line += " SUBCOMMAND";
  return line + " [OPTIONS]  (" + name + " --help for more)";
}

}  // namespace kvdesk::cli
