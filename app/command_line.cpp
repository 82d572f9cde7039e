#include "app/command_line.h"

#include <cstdio>

namespace kvdesk {

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
  if (chosen == &app && app.get_require_subcommand_min() > 0) line += " SUBCOMMAND";
  return line + " [OPTIONS]  (" + name + " --help for more)";
}

std::optional<int> parse_command_line(CLI::App& app, const std::string& program, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n%s\n", program.c_str(), e.what(), usage_line(app, program).c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace kvdesk
