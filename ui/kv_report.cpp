// Server figures and the KV report as text.
#include "ui/kv_report.h"

#include <cstdio>

#include "ui/panel_data.h"

namespace kvdesk::ui {
namespace {

std::string number(const std::optional<double>& value) {
  if (!value) return kUnavailable;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", *value);
  return buf;
}

std::string share(const std::optional<double>& value) {
  return value ? format_percent(*value * 100.0) : std::string(kUnavailable);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> server_stats_rows(const ServerStatsView& s) {
  return {
      {"server", s.kind.empty() ? std::string(kUnavailable) : s.kind},
      {"KV cache used", share(s.kv_usage)},
      {"KV tokens", number(s.kv_tokens)},
      {"running", number(s.running)},
      {"waiting", number(s.waiting)},
      {"prefix cache hit rate", share(s.prefix_hit_rate)},
      {"preemptions", number(s.preemptions)},
      {"block size", number(s.block_size)},
      {"blocks", number(s.num_blocks)},
      {"prompt tokens", number(s.prompt_tokens)},
      {"generated tokens", number(s.generation_tokens)},
  };
}

std::string serving_line(const ServeView& serve) {
  if (!serve.on) return "";
  return "serving on " + serve.url + ": " + std::to_string(serve.running) + " running, " +
         std::to_string(serve.waiting) + " waiting, " + std::to_string(serve.served) + " served";
}

const char* no_block_map_note(const ViewModel& vm) {
  return vm.remote.connected ? "This server shows no block map: its own KV figures are in the Blocks tab."
                             : "No KV cache yet: open a model.";
}

std::string kv_report_text(const ViewModel& vm) {
  std::string out = "engine: " + (vm.remote.connected ? "remote " + vm.remote.url : std::string("in-process")) + "\n";
  out += "model: " + (vm.model.name.empty() ? vm.model.path : vm.model.name) + "\n";
  if (vm.kv.valid) {
    const KvView& kv = vm.kv;
    out += "blocks: " + std::to_string(kv.blocks_total) + " total, " + std::to_string(kv.blocks_used) + " used, " +
           std::to_string(kv.blocks_cached) + " cached, " + std::to_string(kv.blocks_free) + " free, " +
           std::to_string(kv.blocks_shared) + " shared\n";
    out += "block size: " + std::to_string(kv.block_size) + "\n";
    out += "sequences: " + std::to_string(kv.sequences.size()) + "\n";
    out += "prefix hits: " + std::to_string(kv.prefix_hits) + "\n";
  } else {
    out += std::string("blocks: ") + kUnavailable + "\n";
  }
  if (vm.remote.connected) {
    out += std::string("server statistics: ") + (vm.remote.stats_read ? "read" : "not read yet") + "\n";
    for (const auto& [name, value] : server_stats_rows(vm.remote.stats)) out += "server " + name + ": " + value + "\n";
  }
  if (const std::string line = serving_line(vm.serve); !line.empty()) out += line + "\n";
  return out;
}

}  // namespace kvdesk::ui
