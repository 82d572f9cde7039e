// kvdesk-cli models: the GGUF models on this machine (app/library: LM Studio's, Ollama's, the
// Hugging Face cache's, llama.cpp's and the --dir folders), each with what it is and what fits
// in the memory available now, read from headers only.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "app/library/model_library.h"
#include "engine/system/memory_limit.h"

namespace kvdesk::cli {
namespace {

struct ModelsArgs {
  std::vector<std::string> dirs;
  bool only_dirs = false;
  double memory_gib = 0;   // 0: the memory available now
  bool json = false;
  int scans = 1;           // > 1: scan again, each scan's time on stderr (later ones re-read only changes)
};

nlohmann::json fits_json(const std::vector<library::KvFit>& fits) {
  if (fits.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::object();
  for (const library::KvFit& f : fits) {
    j[kv_type_name(f.type)] = {{"max_context", f.max_context}, {"conversations_4k", f.conversations}};
  }
  return j;
}

nlohmann::json card_json(const library::ModelCard& c, uint64_t memory_bytes) {
  return {
      {"path", c.found.files.empty() ? std::string() : c.found.files.front()},
      {"files", c.found.files},
      {"projectors", c.found.projectors},
      {"name", c.found.name},
      {"source", library::model_source_key(c.found.source)},
      {"size_bytes", c.size_bytes},
      {"arch", c.arch},
      {"params", c.params},
      {"weight_type", c.weight_type},
      {"context_length", c.context_length},
      {"chat_template", c.chat_template},
      {"fits", fits_json(library::kv_fits(c, memory_bytes))},
      {"error", c.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.error)},
      {"broken", c.broken},
  };
}

// "7.6B", "260K"
std::string count_text(uint64_t n) {
  char text[32];
  if (n >= 1000000000) std::snprintf(text, sizeof(text), "%.1fB", double(n) / 1e9);
  else if (n >= 1000000) std::snprintf(text, sizeof(text), "%.1fM", double(n) / 1e6);
  else std::snprintf(text, sizeof(text), "%.0fK", double(n) / 1e3);
  return text;
}

// One model per block of lines: name and source, then its facts, then the fits or the error.
void print_card(const library::ModelCard& c, uint64_t memory_bytes) {
  std::printf("%s  (%s)\n", c.found.name.c_str(), library::model_source_name(c.found.source));
  std::printf("  %s\n", c.found.files.empty() ? "" : c.found.files.front().c_str());
  if (c.broken) {
    std::printf("  broken: %s\n", c.error.c_str());
    return;
  }
  std::printf("  %s, %s parameters, %s, %s, context %lld, template %s\n", c.arch.c_str(), count_text(c.params).c_str(),
              c.weight_type.c_str(), mib_text(c.size_bytes).c_str(), static_cast<long long>(c.context_length),
              c.chat_template.c_str());
  if (!c.found.projectors.empty()) std::printf("  with %zu vision projector file(s)\n", c.found.projectors.size());
  if (!c.error.empty()) {
    std::printf("  cannot run here: %s\n", c.error.c_str());
    return;
  }
  std::printf("  fits:");
  for (const library::KvFit& f : library::kv_fits(c, memory_bytes)) {
    std::printf(" %s %lld tokens (%lld x 4K);", kv_type_name(f.type), static_cast<long long>(f.max_context),
                static_cast<long long>(f.conversations));
  }
  std::printf("\n");
}

int run_models(const ModelsArgs& a) {
  const std::vector<library::SourceRoot> roots =
      a.only_dirs ? library::library_roots([](const char*) -> const char* { return nullptr; }, a.dirs)
                  : library::library_roots(library::process_environment(), a.dirs);
  const uint64_t memory_bytes = a.memory_gib > 0 ? uint64_t(a.memory_gib * double(uint64_t(1) << 30)) : available_memory_bytes();
  library::ModelLibrary lib;
  library::ScanReport report;
  for (int scan = 1; scan <= a.scans; ++scan) {
    report = lib.scan(roots);
    if (a.scans > 1) {
      std::fprintf(stderr, "scan %d: %zu models in %.4f s (%d read, %d unchanged)\n", scan, report.cards.size(),
                   report.seconds, report.read, report.reused);
    }
  }
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const library::ModelCard& c : report.cards) out.push_back(card_json(c, memory_bytes));
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (const library::ModelCard& c : report.cards) print_card(c, memory_bytes);
    std::printf("%zu models, found in %.3f s; fits are for %s of memory (weights and KV), %lld-token conversations\n",
                report.cards.size(), report.seconds, mib_text(memory_bytes).c_str(),
                static_cast<long long>(library::kFitConversationTokens));
  }
  for (const std::string& problem : report.problems) std::fprintf(stderr, "kvdesk-cli: %s\n", problem.c_str());
  return 0;
}

}  // namespace

Command add_models_command(CLI::App& app) {
  auto args = std::make_shared<ModelsArgs>();
  CLI::App* cmd = app.add_subcommand("models", "List the GGUF models on this machine and what fits in its memory");
  cmd->add_option("--dir", args->dirs, "Also look in this folder (any depth); repeatable");
  cmd->add_flag("--only-dirs", args->only_dirs, "Only the --dir folders, not LM Studio's, Ollama's, Hugging Face's or llama.cpp's");
  cmd->add_option("--memory-gib", args->memory_gib, "Memory for weights and KV (default: what is available now)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print a JSON array, one object per model");
  cmd->add_option("--scans", args->scans, "Scan this many times, each scan's time on stderr (later scans read only changed files)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return Command{cmd, [args] { return run_models(*args); }};
}

}  // namespace kvdesk::cli
