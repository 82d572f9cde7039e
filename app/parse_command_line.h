// How every kvdesk program reads its command line (CLI11): --help prints usage and exits 0; a
// usage error is one line on stderr, a pointer to --help, and exit status 2.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>

namespace kvdesk {

// The exit status to leave with now, or nullopt when the program should go on.
inline std::optional<int> parse_command_line(CLI::App& app, const char* program, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", program, e.what(), program);
    return 2;
  }
  return std::nullopt;
}

}  // namespace kvdesk
