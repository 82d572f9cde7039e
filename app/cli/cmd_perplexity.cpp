// kvdesk-cli perplexity: how well the model predicts a text with a given KV storage type, and
// with --compare how far that type moves each next-token distribution from a reference type's
// (KL divergence, top-1 agreement). The math is engine/lab/perplexity.h.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/cli/cli_common.h"
#include "engine/error.h"
#include "engine/lab/perplexity.h"
#include "kernels/check.h"

namespace kvdesk::cli {
namespace {

struct PerplexityArgs {
  ModelArgs model;
  std::string text_path;
  std::string compare;   // empty: no reference run
  int ctx = 0;
  bool json = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the text file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

KvType kv_type_option(const std::string& name) {
  const std::optional<KvType> type = kv_type_from_name(name);
  KVDESK_ASSERT(type.has_value());   // CLI11 checked the name
  return *type;
}

KvLayout layout_of(KvType type, const ModelArgs& args) {
  KvLayout layout;
  layout.k_type = type;
  layout.v_type = type;
  layout.block_size = args.block_size;
  layout.recent_rows = args.kv_recent;
  return layout;
}

nlohmann::json result_json(const PerplexityResult& r, const PerplexityArgs& a) {
  const bool compared = !a.compare.empty();
  const auto or_null = [&](double x) { return compared ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"ppl", r.ppl},
          {"ppl_ref", or_null(r.ppl_ref)},
          {"kl_mean", or_null(r.kl_mean)},
          {"kl_max", or_null(r.kl_max)},
          {"top1_agree", or_null(r.top1_agree)},
          {"tokens", r.tokens},
          {"ctx", r.ctx},
          {"kv_type", a.model.kv_type},
          {"kv_recent", a.model.kv_recent},
          {"compare", compared ? nlohmann::json(a.compare) : nlohmann::json(nullptr)}};
}

int run_perplexity(const PerplexityArgs& a) {
  const std::string text = read_text(a.text_path);
  // Perplexity runs the CPU forward pass (engine/lab/perplexity.cpp), so auto means the CPU here.
  if (a.model.backend == BackendRequest::Cuda) {
    throw UsageError("perplexity runs on the CPU backend only; use --backend cpu or auto");
  }
  ModelArgs model = a.model;
  model.backend = BackendRequest::Cpu;
  Session s = open_session(model);
  const std::vector<int32_t> tokens = s.model->tokenizer().encode(text, false);
  PerplexityOptions options;
  options.layout = layout_of(kv_type_option(a.model.kv_type), a.model);
  if (!a.compare.empty()) options.reference = layout_of(kv_type_option(a.compare), a.model);
  options.ctx = a.ctx;
  options.bos = s.model->tokenizer().bos_id();
  const PerplexityResult r = evaluate_perplexity(*s.model, *s.pool, tokens, options);
  if (a.json) {
    std::printf("%s\n", result_json(r, a).dump().c_str());
    return 0;
  }
  std::printf("perplexity %.4f over %lld tokens (kv %s, windows of %d tokens)\n", r.ppl, static_cast<long long>(r.tokens),
              a.model.kv_type.c_str(), r.ctx);
  if (!a.compare.empty()) {
    std::printf("reference kv %s: perplexity %.4f; KL divergence mean %.6f max %.6f nats; top-1 agreement %.2f%%\n",
                a.compare.c_str(), r.ppl_ref, r.kl_mean, r.kl_max, r.top1_agree);
  }
  return 0;
}

}  // namespace

Command add_perplexity_command(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  std::vector<std::string> names;
  for (KvType t : all_kv_types()) names.push_back(kv_type_name(t));
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity over a text file, and a KV type's KL divergence from a reference type");
  add_model_options(cmd, args->model);
  cmd->add_option("-f,--file", args->text_path, "Text file to score")->required();
  cmd->add_option("--kv-type", args->model.kv_type, "KV cache storage type")->check(CLI::IsMember(names))->capture_default_str();
  cmd->add_option("--compare", args->compare, "Also run this KV type and compare next-token distributions with it")
      ->check(CLI::IsMember(names));
  cmd->add_option("--block-size", args->model.block_size, "KV block size in tokens")
      ->check(block_size_check())
      ->capture_default_str();
  add_kv_recent_option(cmd, args->model);
  cmd->add_option("--ctx", args->ctx, "Tokens per window, BOS included (default: min(model context, 512))")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_flag("--json", args->json, "Print one JSON object");
  return Command{cmd, [args] { return run_perplexity(*args); }};
}

}  // namespace kvdesk::cli
