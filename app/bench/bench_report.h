// A benchmark's results in three forms: JSON for machines (one object with the run's
// metadata and the mode's results), Markdown for people (the tables, the exact command line,
// date and machine), and SVG plots written beside the Markdown and linked from it.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kvdesk::bench {

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct Series {
  std::string name;
  std::vector<double> y;  // [points]
  std::vector<double> x;  // [points] for line plots; empty for bar plots
};

// A line plot (x numeric) or a grouped bar plot (one group per category, one bar per series).
struct Plot {
  std::string name;  // file tag: <report stem>-<name>.svg
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> categories;  // bar plots: [groups]; empty for a line plot
  std::vector<Series> series;
};

struct Report {
  std::string mode;
  bool partial = false;  // stopped by Ctrl-C: what was measured so far
  bool repeated = true;  // figures are medians of repeated runs (not one deterministic run)
  nlohmann::json settings = nlohmann::json::object();
  nlohmann::json results = nlohmann::json::object();
  std::vector<Table> tables;
  std::vector<Plot> plots;
  std::vector<std::string> notes;  // paragraphs under the tables
};

// Where and how the run happened.
struct RunInfo {
  std::string command_line;
  std::string date;  // UTC, ISO 8601
  int nproc = 0;
  std::string cpu;          // /proc/cpuinfo "model name"
  double load_average = 0;  // 1-minute load at the start: near or above nproc, the machine was shared
  std::string backend = "cpu";  // the backend the run's models ran on (backend_name)
  std::string backend_note;     // why (BackendChoice::note)
  std::string isa;              // the CPU kernels' instruction set (cpu_isa_name), forced or detected
  std::string isa_detected;     // the widest this CPU has
  std::optional<int> busy_core;  // the CPU a spinning process kept busy (--busy-core)
  nlohmann::json model = nlohmann::json::object();
};

RunInfo make_run_info(int argc, char** argv);
nlohmann::json report_json(const Report& report, const RunInfo& info);
// The Markdown text; plot_files are the SVG file names (relative to the .md), one per plot.
std::string report_markdown(const Report& report, const RunInfo& info, const std::vector<std::string>& plot_files);
std::string table_markdown(const Table& table);
// "CPU kernels: avx2 (forced; this CPU has up to avx512-vnni)"
std::string isa_line(const RunInfo& info);
// "A process spins on CPU n for the run", or "" without --busy-core.
std::string busy_core_line(const RunInfo& info);

// Writes the JSON (when json_path is set) and the Markdown with its SVGs (when md_path is
// set). Throws kvdesk::Error when a file cannot be written.
void write_report(const Report& report, const RunInfo& info, const std::string& json_path, const std::string& md_path);

}  // namespace kvdesk::bench
