// kvdesk-cli tokenize: the ids (and vocabulary pieces) a text becomes. Typed text is always
// text: "<s>" in it is never the BOS control token.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "app/cli/cli_common.h"

namespace kvdesk::cli {
namespace {

struct TokenizeArgs {
  ModelArgs model;
  std::string text;
  bool no_bos = false;
  bool json = false;
};

int run_tokenize(const TokenizeArgs& a) {
  Session s = open_session(a.model);
  const Tokenizer& tok = s.model->tokenizer();
  const std::vector<int32_t> ids = encode_prompt(*s.model, a.text, !a.no_bos);
  if (a.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tok.piece(id));
    nlohmann::json j{{"ids", ids}, {"pieces", pieces}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  for (int32_t id : ids) std::printf("%6d  %s\n", id, tok.piece(id).c_str());
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Show the token ids of a text");
  cmd->add_option("-m,--model", args->model.model_path, "GGUF model file")->required();
  cmd->add_option("--tokenizer", args->model.tokenizer_path, "SentencePiece .model file instead");
  cmd->add_option("-p,--prompt", args->text, "Text to tokenize")->required();
  cmd->add_flag("--no-bos", args->no_bos, "Do not prepend the BOS token");
  cmd->add_flag("--json", args->json, "Print {\"ids\": [...], \"pieces\": [...]}");
  args->model.threads = 1;
  args->model.backend = BackendRequest::Cpu;   // tokenizing runs no layer
  return Command{cmd, [args] { return run_tokenize(*args); }};
}

}  // namespace kvdesk::cli
