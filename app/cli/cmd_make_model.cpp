// kvdesk-cli make-model: write a random-weight Llama GGUF of a chosen shape with a real
// vocabulary, for tests and benchmarks at realistic sizes without downloads.
#include <chrono>
#include <cstdio>

#include "app/cli/cli_common.h"
#include "engine/error.h"
#include "engine/random_model.h"

namespace kvdesk::cli {
namespace {

struct MakeModelArgs {
  RandomModelSpec spec;
  std::string type = "f16";
  std::string out_path;
};

GgmlType parse_weight_type(const std::string& name) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    if (name == ggml_type_info(t).name) return t;
  }
  throw UsageError("unknown weight type '" + name + "' (choose f32, f16, bf16, q8_0 or q4_0)");
}

int run_make_model(MakeModelArgs& a) {
  a.spec.type = parse_weight_type(a.type);
  const auto start = std::chrono::steady_clock::now();
  write_random_model(a.spec, a.out_path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "wrote %s in %.1f s\n", a.out_path.c_str(), s);
  return 0;
}

}  // namespace

Command add_make_model_command(CLI::App& app) {
  auto args = std::make_shared<MakeModelArgs>();
  RandomModelSpec& s = args->spec;
  CLI::App* cmd = app.add_subcommand("make-model", "Write a random-weight GGUF of a real shape");
  cmd->add_option("--layers", s.layers, "Transformer layers")->capture_default_str();
  cmd->add_option("--embd", s.embd, "Embedding size")->capture_default_str();
  cmd->add_option("--heads", s.heads, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", s.kv_heads, "KV heads (GQA when fewer than heads)")->capture_default_str();
  cmd->add_option("--ff", s.ff, "Feed-forward size")->capture_default_str();
  cmd->add_option("--ctx", s.context_length, "Context length")->check(CLI::Range(16, 1 << 24))->capture_default_str();
  cmd->add_option("--vocab-from", s.vocab_from, "SentencePiece .model whose vocabulary to use")->required();
  cmd->add_option("--type", args->type, "Weight type: f32, f16, bf16, q8_0, q4_0")->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->add_option("--name", s.name, "general.name")->capture_default_str();
  cmd->add_option("-o,--output", args->out_path, "Output .gguf")->required();
  return Command{cmd, [args] { return run_make_model(*args); }};
}

}  // namespace kvdesk::cli
