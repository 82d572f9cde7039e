// kvdesk-cli: the headless front end. Parses the command line, runs one subcommand, and turns
// every failure into one line on stderr: exit 2 for usage, 1 for a runtime error.
#include <cstdio>
#include <exception>
#include <optional>

#include "app/cli/cli_common.h"
#include "app/command_line.h"
#include "engine/error.h"
#include "engine/system/cpu_isa_choice.h"

int main(int argc, char** argv) {
  using namespace kvdesk::cli;
  CLI::App app{"kvdesk-cli: run GGUF models with a paged KV cache, headless"};
  app.require_subcommand(1);
  const std::vector<Command> commands = {
      add_generate_command(app), add_tokenize_command(app), add_info_command(app),
      add_logits_command(app), add_make_model_command(app), add_replay_command(app),
      add_conversations_command(app), add_perplexity_command(app), add_serve_command(app), add_chat_command(app),
      add_template_command(app), add_models_command(app),
  };
  std::string isa;  // every subcommand's --isa
  for (const Command& c : commands) kvdesk::add_isa_option(c.app, isa);
  if (const std::optional<int> exit_code = kvdesk::parse_command_line(app, "kvdesk-cli", argc, argv)) return *exit_code;
  try {
    try {
      kvdesk::apply_cpu_isa_choice(isa);
    } catch (const kvdesk::IsaNameError& e) {
      throw UsageError(e.what());
    }
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kvdesk-cli: %s\n%s\n", e.what(), kvdesk::usage_line(app, "kvdesk-cli").c_str());
    return 2;
  } catch (const kvdesk::Error& e) {
    std::fprintf(stderr, "kvdesk-cli: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvdesk-cli: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
