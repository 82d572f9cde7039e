// The KV panels' figures as plain text: what a remote server's own statistics say (each figure
// by name, "unavailable" where that server does not expose it, never a zero standing in for it),
// the app's HTTP server line, and the whole report a script writes (kv_report NAME.txt) so tests
// read what the panels show without reading pixels.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ui/view_model.h"

namespace kvdesk::ui {

inline constexpr const char* kUnavailable = "unavailable";

// (figure, value) rows in the order the panel shows them.
std::vector<std::pair<std::string, std::string>> server_stats_rows(const ServerStatsView& stats);

// "serving on URL: 1 running, 0 waiting, 3 served", or "" when the app does not serve.
std::string serving_line(const ServeView& serve);

// What a KV panel says when there is no block map to draw: no model yet, or a server that does
// not show its blocks (its own figures are above the block map).
const char* no_block_map_note(const ViewModel& vm);

// The engine the chat runs on, its KV pool's blocks and sequences, and a remote's own figures.
std::string kv_report_text(const ViewModel& vm);

}  // namespace kvdesk::ui
