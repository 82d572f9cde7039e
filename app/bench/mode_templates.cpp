// kvdesk-bench templates: how long rendering a chat template takes for a typical conversation
// (a system message and four exchanges, the last user message waiting for its answer), for the
// model's own template, every built-in family and each *.jinja file of --templates DIR: parse
// once, then the median time of one render (the conversation turned into template values, the
// template run, its output split into template text and content), as the engine does it for
// each request. The figure to hold: under 1 ms per render.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/family_templates.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Renders per timed run: enough that one run takes about a millisecond or more.
constexpr int kRendersPerRun = 20;

std::vector<ChatMessage> typical_conversation() {
  std::vector<ChatMessage> messages = {
      {"system", "You are a helpful assistant. Answer briefly and cite the page when you use the manual."}};
  for (int turn = 0; turn < 4; ++turn) {
    messages.push_back({"user", "Question " + std::to_string(turn) +
                                    ": how much KV cache memory does a 4K-token conversation take with int8 keys "
                                    "and values on a model with 32 layers and 8 KV heads of 128 dims?"});
    if (turn < 3) {
      messages.push_back({"assistant", "2 x 32 layers x 8 heads x 128 dims x 1 byte = 64 KiB per token, so a "
                                       "4096-token conversation takes 256 MiB; f16 would take twice that."});
    }
  }
  return messages;
}

struct Timed {
  std::string name;
  std::string source;
  double parse_us = 0;
  Stats render_us;
  size_t prompt_bytes = 0;
  std::string error;
};

Timed time_template(const std::string& name, const std::string& source, const BenchOptions& o) {
  Timed t{name, source, 0, {}, 0, ""};
  const std::vector<ChatMessage> messages = typical_conversation();
  const ChatSpecialTexts specials{"<s>", "</s>"};
  const auto parse_start = Clock::now();
  const ChatTemplate chat_template = chat_template_from_source(name, source);
  t.parse_us = std::chrono::duration<double, std::micro>(Clock::now() - parse_start).count();
  try {
    t.prompt_bytes = joined_text(render_chat(chat_template, messages, specials)).size();
    std::vector<double> runs;
    for (int run = 0; run < o.repeat; ++run) {
      const auto start = Clock::now();
      for (int k = 0; k < kRendersPerRun; ++k) render_chat(chat_template, messages, specials);
      runs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kRendersPerRun);
    }
    t.render_us = summarize(runs);
  } catch (const Error& e) {
    t.error = e.what();
  }
  return t;
}

std::vector<std::pair<std::string, std::string>> templates_to_time(const BenchOptions& o) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::unique_ptr<GgufFile> file = GgufFile::open(o.model_path);
  if (const std::optional<std::string> own = file->find_string("tokenizer.chat_template"); own && !own->empty()) {
    out.emplace_back("model's own", *own);
  }
  for (const FamilyTemplate& f : family_templates()) out.emplace_back(std::string(f.name), f.source);
  if (!o.templates_dir.empty()) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(o.templates_dir)) {
      if (entry.path().extension() == ".jinja") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& path : files) {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      out.emplace_back(path.filename().string(), text.str());
    }
  }
  return out;
}

}  // namespace

Report run_templates(const BenchOptions& o) {
  Report report;
  report.mode = "templates";
  report.settings = {{"renders_per_run", kRendersPerRun}, {"messages", typical_conversation().size()}};
  Table table{"Chat template render time, typical conversation (" + std::to_string(typical_conversation().size()) +
                  " messages)",
              {"template", "parse µs", "render µs (median, min..max)", "prompt bytes"},
              {}};
  std::vector<double> medians;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& [name, source] : templates_to_time(o)) {
    std::fprintf(stderr, "templates: %s\n", name.c_str());
    const Timed t = time_template(name, source, o);
    if (!t.error.empty()) {
      table.rows.push_back({name, format_number(t.parse_us, 1), "error: " + t.error.substr(0, 80), "-"});
      results.push_back({{"template", name}, {"error", t.error}});
      continue;
    }
    medians.push_back(t.render_us.median);
    table.rows.push_back({name, format_number(t.parse_us, 1), format_stats(t.render_us, 1), std::to_string(t.prompt_bytes)});
    results.push_back({{"template", name},
                       {"parse_us", t.parse_us},
                       {"render_us", stats_json(t.render_us)},
                       {"prompt_bytes", t.prompt_bytes}});
  }
  const Stats across = summarize(medians);
  report.results = {{"templates", results}, {"median_render_us", across.median}, {"max_render_us", across.max}};
  report.tables.push_back(std::move(table));
  report.notes.push_back("Across the " + std::to_string(medians.size()) + " templates that render this conversation: " +
                         "median render " + format_number(across.median, 1) + " µs, slowest " +
                         format_number(across.max, 1) + " µs.");
  return report;
}

}  // namespace kvdesk::bench
