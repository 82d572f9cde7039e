// Command-line parsing for kvdesk (CLI11).
#include "app/gui/app_options.h"

#include "app/command_line.h"

namespace kvdesk::gui {

ParsedOptions parse_app_options(int argc, char** argv) {
  ParsedOptions parsed;
  AppOptions& o = parsed.options;
  CLI::App app{"kvdesk: chat with local language models and watch their paged KV cache"};
  CLI::Option* model = app.add_option("--model,-m", o.model_path, "GGUF model to open (default: the most recently used one)");
  CLI::Option* remote =
      app.add_option("--remote", o.remote_url, "chat through this OpenAI-compatible server (http://HOST:PORT) instead")
          ->excludes(model);
  app.add_option("--api-key", o.remote_api_key, "the --remote server's API key (sent as a bearer token)")->needs(remote);
  app.add_option("--db", o.db_path, "conversation database (default: ~/.local/share/kvdesk/kvdesk.db)");
  app.add_option("--script", o.script_path, "replay the actions in FILE, one per line, then exit");
  app.add_option("--screenshot-dir", o.screenshot_dir, "where the script's screenshots go");
  app.add_option("--script-timeout", o.script_timeout_s, "seconds one script line may wait")->check(positive_number());
  app.add_flag("--frame-stats", o.frame_stats, "print the median and p95 frame time at exit");
  app.add_option("--kv-blocks", o.kv_blocks, "KV pool of exactly N blocks")->check(non_negative_number());
  app.add_option("--host-tier-mib", o.host_tier_mib,
                 "host memory in MiB for KV moved out of a full pool (0: none; default: the setting, 512)")
      ->check(non_negative_number());
  app.add_option("--threads,-t", o.threads, "CPU threads (0: all cores)")->check(non_negative_number());
  add_backend_option(&app, o.backend);
  app.add_option("--width", o.width, "window width")->check(CLI::Range(320, 8192));
  app.add_option("--height", o.height, "window height")->check(CLI::Range(240, 8192));
  parsed.exit_code = parse_command_line(app, "kvdesk", argc, argv);
  o.size_given = app.count("--width") + app.count("--height") > 0;
  return parsed;
}

}  // namespace kvdesk::gui
