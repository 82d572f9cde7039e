// JSON and Markdown reports and the run's metadata (see bench_report.h).
#include "app/bench/bench_report.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/bench/bench_stats.h"
#include "app/bench/bench_svg.h"
#include "engine/error.h"

namespace kvdesk::bench {
namespace {

// An argument as a POSIX shell would need it: bare when safe, else single-quoted.
std::string shell_quote(const std::string& arg) {
  const bool safe = !arg.empty() && arg.find_first_not_of(
                                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=,:+@%") == std::string::npos;
  if (safe) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "unknown";
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

// Creates the file's folder when missing.
void write_file(const std::string& path, const std::string& text) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(path + ": cannot write the report file");
}

// " cell |" with any | in the cell escaped.
std::string cell_markdown(const std::string& cell) {
  std::string out = " ";
  for (char c : cell) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out + " |";
}

std::string model_line(const nlohmann::json& m) {
  if (m.empty()) return "";
  return "Model: `" + m.value("path", std::string()) + "` (" + std::to_string(m.value("layers", 0)) + " layers, " +
         std::to_string(m.value("heads", 0)) + " heads, " + std::to_string(m.value("kv_heads", 0)) +
         " KV heads, head dim " + std::to_string(m.value("head_dim", 0)) + ", context " +
         std::to_string(m.value("context_length", 0)) + ")\n";
}

}  // namespace

RunInfo make_run_info(int argc, char** argv) {
  RunInfo info;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) info.command_line += ' ';
    info.command_line += shell_quote(argv[i]);
  }
  info.date = utc_now();
  info.nproc = int(std::thread::hardware_concurrency());
  info.cpu = cpu_model();
  info.load_average = load_average();
  return info;
}

nlohmann::json report_json(const Report& report, const RunInfo& info) {
  return {{"tool", "kvdesk-bench"},
          {"mode", report.mode},
          {"partial", report.partial},
          {"command", info.command_line},
          {"date", info.date},
          {"machine",
           {{"nproc", info.nproc},
            {"cpu", info.cpu},
            {"load_average", info.load_average},
            {"busy_core", info.busy_core ? nlohmann::json(*info.busy_core) : nlohmann::json()}}},
          {"backend", {{"name", info.backend}, {"note", info.backend_note}}},
          {"cpu_isa", {{"used", info.isa}, {"detected", info.isa_detected}}},
          {"model", info.model},
          {"settings", report.settings},
          {"results", report.results}};
}

std::string table_markdown(const Table& table) {
  std::string md;
  if (!table.title.empty()) md += "### " + table.title + "\n\n";
  md += "|";
  for (const std::string& h : table.header) md += cell_markdown(h);
  md += "\n|";
  for (size_t i = 0; i < table.header.size(); ++i) md += i == 0 ? " --- |" : " ---: |";
  md += "\n";
  for (const auto& row : table.rows) {
    md += "|";
    for (const std::string& cell : row) md += cell_markdown(cell);
    md += "\n";
  }
  return md + "\n";
}

std::string isa_line(const RunInfo& info) {
  return "CPU kernels: " + info.isa + (info.isa == info.isa_detected ? "" : " (forced; this CPU has up to " + info.isa_detected + ")");
}

std::string busy_core_line(const RunInfo& info) {
  if (!info.busy_core) return "";
  return "A process spins on CPU " + std::to_string(*info.busy_core) + " for the run (--busy-core)";
}

std::string report_markdown(const Report& report, const RunInfo& info, const std::vector<std::string>& plot_files) {
  std::string md = "# kvdesk-bench " + report.mode + (report.partial ? " (partial: stopped by Ctrl-C)" : "") + "\n\n";
  md += "Command:\n\n    " + info.command_line + "\n\n";
  md += "Date: " + info.date + "  \nMachine: " + std::to_string(info.nproc) + " CPUs, " + info.cpu + ", load average " +
        format_number(info.load_average, 2) + " at the start  \n";
  md += "Backend: " + info.backend + (info.backend_note.empty() ? "" : " (" + info.backend_note + ")") + "  \n";
  md += isa_line(info) + "  \n";
  if (info.busy_core) md += busy_core_line(info) + "  \n";
  md += model_line(info.model) + "\n";
  if (report.repeated) md += "Figures are medians of repeated runs with (min..max) in brackets.\n\n";
  for (const Table& t : report.tables) md += table_markdown(t);
  for (size_t i = 0; i < report.plots.size() && i < plot_files.size(); ++i) {
    md += "![" + report.plots[i].title + "](" + plot_files[i] + ")\n\n";
  }
  for (const std::string& note : report.notes) md += note + "\n\n";
  return md;
}

void write_report(const Report& report, const RunInfo& info, const std::string& json_path, const std::string& md_path) {
  if (!json_path.empty())
    write_file(json_path,
               report_json(report, info).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (md_path.empty()) return;
  const std::filesystem::path md(md_path);
  std::vector<std::string> plot_files;
  for (const Plot& plot : report.plots) {
    const std::string name = md.stem().string() + "-" + plot.name + ".svg";
    write_file((md.parent_path() / name).string(), render_svg(plot));
    plot_files.push_back(name);
  }
  write_file(md_path, report_markdown(report, info, plot_files));
}

}  // namespace kvdesk::bench
