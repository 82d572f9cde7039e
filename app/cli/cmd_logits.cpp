// kvdesk-cli logits: the top-K raw next-token logits at every prompt position; the tool the
// reference tests and quality checks compare implementations with.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "app/cli/cli_common.h"
#include "engine/error.h"

namespace kvdesk::cli {
namespace {

struct LogitsArgs {
  ModelArgs model;
  std::string prompt;
  int top = 10;
  bool json = false;
  bool no_bos = false;
};

std::vector<int32_t> top_ids(const float* logits, int32_t vocab, int top) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const int k = std::min(top, int(vocab));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(size_t(k));
  return ids;
}

int run_logits(const LogitsArgs& a) {
  Session s = open_session(a.model);
  const std::vector<int32_t> prompt = encode_prompt(*s.model, a.prompt, !a.no_bos);
  if (prompt.empty()) throw Error("the prompt is empty");
  size_kv_cache(s, a.model, int32_t(prompt.size()));
  const std::vector<float> logits = prompt_logits(*s.core, prompt);
  const int32_t vocab = s.model->config().vocab_size;
  nlohmann::json positions = nlohmann::json::array();
  for (size_t p = 0; p < prompt.size(); ++p) {
    const float* row = logits.data() + p * size_t(vocab);
    nlohmann::json top = nlohmann::json::array();
    for (int32_t id : top_ids(row, vocab, a.top)) top.push_back({id, row[id]});
    positions.push_back({{"pos", p}, {"token", prompt[p]}, {"top", top}});
  }
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"positions", positions}}.dump().c_str());
    return 0;
  }
  for (const auto& pos : positions) {
    std::printf("pos %3d token %6d:", pos["pos"].get<int>(), pos["token"].get<int>());
    for (const auto& t : pos["top"]) std::printf(" %d:%.4f", t[0].get<int>(), t[1].get<double>());
    std::printf("\n");
  }
  return 0;
}

}  // namespace

Command add_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "Top-K raw logits at every prompt position");
  add_model_options(cmd, args->model);
  add_kv_options(cmd, args->model);
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text")->required();
  cmd->add_option("--top", args->top, "How many logits per position")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_flag("--no-bos", args->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--json", args->json, "Print JSON");
  return Command{cmd, [args] { return run_logits(*args); }};
}

}  // namespace kvdesk::cli
