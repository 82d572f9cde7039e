// kvdesk-cli info: what a model file is and what its KV cache costs per token for each KV
// storage type (the seeds' arithmetic: layers x 2 x kv_heads x head_dim x bytes).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>

#include "app/cli/cli_common.h"

namespace kvdesk::cli {
namespace {

struct InfoArgs {
  ModelArgs model;
  bool json = false;
};

nlohmann::json info_json(const Model& m) {
  const ModelConfig& c = m.config();
  std::map<std::string, int> type_counts;
  for (const GgufTensorInfo& t : m.file().tensors()) ++type_counts[std::string(ggml_type_info(t.type).name)];
  nlohmann::json kv = nlohmann::json::object();
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16}) {
    kv[kv_type_name(t)] = {{"bytes_per_token", kv_bytes_per_token(c, t, t)}};
  }
  return {
      {"path", m.file().path()},
      {"gguf_version", m.file().version()},
      {"architecture", c.architecture},
      {"name", c.name},
      {"context_length", c.context_length},
      {"embedding_length", c.embedding_length},
      {"block_count", c.block_count},
      {"feed_forward_length", c.feed_forward_length},
      {"head_count", c.head_count},
      {"head_count_kv", c.head_count_kv},
      {"head_dim", c.head_dim},
      {"rope_dimension_count", c.rope_dimension_count},
      {"rope_freq_base", c.rope_freq_base},
      {"rms_eps", c.rms_eps},
      {"vocab_size", c.vocab_size},
      {"tied_output", m.weights().tied_output},
      {"tensor_types", type_counts},
      {"parameters", m.weights().num_parameters},
      {"weight_bytes", m.weights().weight_bytes},
      {"kv_per_token", kv},
  };
}

void print_text(const nlohmann::json& j) {
  std::printf("%s (%s, GGUF v%d)\n", j["path"].get<std::string>().c_str(),
              j["architecture"].get<std::string>().c_str(), j["gguf_version"].get<int>());
  for (const char* key : {"name", "context_length", "embedding_length", "block_count",
                          "feed_forward_length", "head_count", "head_count_kv", "head_dim",
                          "rope_dimension_count", "rope_freq_base", "rms_eps", "vocab_size",
                          "tied_output", "parameters", "weight_bytes"}) {
    std::printf("  %-22s %s\n", key, j[key].dump().c_str());
  }
  std::printf("  tensor types          ");
  for (const auto& [type, count] : j["tensor_types"].items()) std::printf(" %s x%d", type.c_str(), count.get<int>());
  std::printf("\n  KV bytes per token (layers x 2 x kv_heads x head_dim x bytes):\n");
  for (const auto& [type, v] : j["kv_per_token"].items()) {
    std::printf("    %-5s %8lld\n", type.c_str(), v["bytes_per_token"].get<long long>());
  }
}

int run_info(const InfoArgs& a) {
  Session s = open_session(a.model);
  const nlohmann::json j = info_json(*s.model);
  if (a.json) {
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_text(j);
  }
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a model and its KV cost");
  cmd->add_option("-m,--model", args->model.model_path, "GGUF model file")->required();
  cmd->add_option("--tokenizer", args->model.tokenizer_path, "SentencePiece .model file instead");
  cmd->add_flag("--json", args->json, "Print JSON");
  args->model.threads = 1;
  return Command{cmd, [args] { return run_info(*args); }};
}

}  // namespace kvdesk::cli
