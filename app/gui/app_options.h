// The kvdesk command line: kvdesk [--model PATH | --remote URL [--api-key KEY]] [--db PATH] [--script FILE
// [--screenshot-dir DIR] [--script-timeout S]] [--frame-stats] [--kv-blocks N] [--host-tier-mib N]
// [--threads N] [--backend auto|cpu|cuda].
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine_types.h"

namespace kvdesk::gui {

struct AppOptions {
  std::string model_path;        // empty: the most recent model, else none
  std::string remote_url;        // non-empty: chat through this OpenAI-compatible server instead
  std::string remote_api_key;    // sent to remote_url as a bearer token
  std::string db_path;           // empty: the store's default path
  std::string script_path;       // non-empty: scripted mode
  std::string screenshot_dir = ".";
  double script_timeout_s = 120; // the longest one script line may wait
  bool frame_stats = false;      // print median / p95 frame time at exit
  int32_t kv_blocks = 0;         // > 0: a pool of exactly this many blocks
  int32_t host_tier_mib = -1;    // >= 0: the host tier's budget, over the setting
  int32_t threads = 0;           // 0: all cores
  BackendRequest backend = BackendRequest::Auto;
  int32_t width = 1280;
  int32_t height = 800;
  bool size_given = false;       // --width or --height: this size, not the remembered one
};

// Returns the options, or the process exit code when parsing ended the run (--help: 0,
// bad arguments: 2, with the message on stderr).
struct ParsedOptions {
  AppOptions options;
  std::optional<int> exit_code;
};
ParsedOptions parse_app_options(int argc, char** argv);

}  // namespace kvdesk::gui
