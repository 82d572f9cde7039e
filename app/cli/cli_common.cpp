// Options and model opening shared by the kvdesk-cli subcommands.
#include "app/cli/cli_common.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "app/command_line.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/system/memory_limit.h"

namespace kvdesk::cli {
namespace {

std::string kv_type_names() {
  std::string names;
  for (KvType t : all_kv_types()) names += std::string(names.empty() ? "" : ", ") + kv_type_name(t);
  return names;
}

}  // namespace

void add_sampling_options(CLI::App* cmd, SamplingArgs& args) {
  SamplingParams& sp = args.params;
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.top_p = 0.95f;
  sp.min_p = 0.05f;
  cmd->add_option("--temp", sp.temperature, "Temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", sp.top_k, "Top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", sp.top_p, "Top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", sp.min_p, "Min-p (0: off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", sp.repeat_last_n, "Tokens the penalty looks back")->capture_default_str();
  cmd->add_option_function<uint64_t>("--seed", [&args](uint64_t seed) {
    args.params.seed = seed;
    args.seed_given = true;
  }, "Random seed (default: random)");
}

SamplingParams resolve_sampling(SamplingArgs& args) {
  if (!args.seed_given) args.params.seed = std::random_device{}();
  try {
    validate_sampling_params(args.params);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return args.params;
}

void add_chat_template_options(CLI::App* cmd, ChatTemplateArgs& args) {
  CLI::Option* name = cmd->add_option("--chat-template", args.name, "Render messages with this chat template instead of the model's")
                          ->check(CLI::IsMember(chat_template_names()));
  CLI::Option* file = cmd->add_option("--chat-template-file", args.file,
                                      "Render messages with this Jinja chat template file instead of the model's");
  name->excludes(file);
}

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the " + what + " (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read the " + what);
  return text.str();
}

EngineSettings engine_settings(const ModelArgs& args, const ChatTemplateArgs& chat_template) {
  EngineSettings s;
  s.model_path = args.model_path;
  s.tokenizer_path = args.tokenizer_path;
  s.chat_template = chat_template.name;
  if (!chat_template.file.empty()) {
    s.chat_template_source = read_text_file(chat_template.file, "chat template");
    if (s.chat_template_source.empty()) throw Error(chat_template.file + ": the chat template file is empty");
    s.chat_template_file = std::filesystem::path(chat_template.file).filename().string();
  }
  s.backend = args.backend;
  s.threads = resolve_threads(args.threads);
  s.kv = kv_layout(args);
  s.kv_budget_bytes = size_t(args.kv_budget_mib * 1024.0 * 1024.0);
  s.scheduler.host_tier_bytes = size_t(args.host_tier_mib * 1024.0 * 1024.0);
  s.scheduler.host_tier_zstd_level = args.host_tier_zstd;
  return s;
}

void add_model_options(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("-m,--model", args.model_path, "GGUF model file")->required();
  cmd->add_option("--tokenizer", args.tokenizer_path,
                  "SentencePiece .model file to use instead of the GGUF vocabulary");
  cmd->add_option("-t,--threads", args.threads, "CPU threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  add_backend_option(cmd, args.backend);
}

void add_kv_options(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("--kv-type", args.kv_type, "KV cache storage type: " + kv_type_names())
      ->capture_default_str();
  cmd->add_option("--kv-type-k", args.kv_type_k, "storage type of keys only (default: --kv-type)");
  cmd->add_option("--kv-type-v", args.kv_type_v, "storage type of values only (default: --kv-type)");
  cmd->add_option("--block-size", args.block_size, "KV block size in tokens")
      ->check(block_size_check())
      ->capture_default_str();
  add_kv_recent_option(cmd, args);
  cmd->add_option("--attn-numerics", args.attn_numerics,
                  "exact (f32 math) or llamacpp (f16 rounding as llama.cpp's CPU flash attention)")
      ->check(CLI::IsMember({"exact", "llamacpp"}))
      ->capture_default_str();
  cmd->add_option("--kv-budget-mib", args.kv_budget_mib,
                  "KV pool size in MiB (default: just enough for this run)")
      ->check(positive_number());
  cmd->add_option("--host-tier-mib", args.host_tier_mib,
                  "host memory in MiB for KV moved out of a full pool: idle conversations and "
                  "swapped-out requests (0: none; they are dropped and recomputed)")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_option("--host-tier-zstd", args.host_tier_zstd, "zstd level of the host tier's blocks (0: kept as stored)")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
}

void add_retention_options(CLI::App* cmd, RetentionArgs& args) {
  cmd->add_option("--retention", args.policy,
                  "KV retention: none, sinks (first + recent tokens), h2o (heavy hitters + recent), "
                  "snapkv (prompt compressed once by its last tokens' attention)")
      ->check(CLI::IsMember({"none", "sinks", "h2o", "snapkv"}))
      ->capture_default_str();
  cmd->add_option("--kv-keep", args.keep, "KV retention budget: a fraction (0.5, 50%) or a token count (128)")
      ->capture_default_str();
}

RetentionOptions retention_options(const RetentionArgs& args) {
  RetentionOptions o;
  o.policy = parse_retention_policy(args.policy);
  o.budget = parse_retention_budget(args.keep);
  return o;
}

KvType parse_kv_type(const std::string& name) {
  if (const std::optional<KvType> type = kv_type_from_name(name)) return *type;
  throw UsageError("unknown KV type '" + name + "' (choose one of " + kv_type_names() + ")");
}

void add_kv_recent_option(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("--kv-recent", args.kv_recent,
                  "newest rows per sequence also kept in f32 and read exact when K or V is fp8, int8 or int4 (0: none)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
}

CLI::Validator block_size_check() {
  return CLI::IsMember(std::vector<int32_t>(kKvBlockSizes.begin(), kKvBlockSizes.end()));
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return std::max(1, int(std::thread::hardware_concurrency()));
}

Session open_session(const ModelArgs& args) {
  Session s;
  s.backend = select_backend(args.backend);
  s.model = Model::load(args.model_path, ModelLoadOptions{args.tokenizer_path, 0, s.backend.backend == Backend::Cpu});
  s.pool = std::make_unique<ThreadPool>(resolve_threads(args.threads));
  s.forward = make_forward_backend(s.backend.backend, *s.model, *s.pool);
  if (!s.backend.note.empty()) std::fprintf(stderr, "kvdesk-cli: %s\n", s.backend.note.c_str());
  return s;
}

KvLayout kv_layout(const ModelArgs& args) {
  KvLayout layout;
  layout.k_type = parse_kv_type(args.kv_type_k.empty() ? args.kv_type : args.kv_type_k);
  layout.v_type = parse_kv_type(args.kv_type_v.empty() ? args.kv_type : args.kv_type_v);
  layout.block_size = args.block_size;
  layout.recent_rows = args.kv_recent;
  layout.numerics = args.attn_numerics == "llamacpp" ? AttentionNumerics::LlamaCpp : AttentionNumerics::Exact;
  return layout;
}

int32_t blocks_in_budget(double budget_mib, size_t block_bytes) {
  const double blocks = std::floor(budget_mib * 1024.0 * 1024.0 / double(block_bytes));
  return int32_t(std::min(blocks, double(std::numeric_limits<int32_t>::max())));
}

void size_kv_cache(Session& session, const ModelArgs& args, int32_t tokens) {
  const ModelConfig& model = session.model->config();
  KvCacheConfig config;
  config.layout = kv_layout(args);
  KvLayout& layout = config.layout;
  const size_t block_bytes = kv_bytes_per_block(model, layout.k_type, layout.v_type, layout.block_size);
  if (args.kv_budget_mib > 0) {
    layout.num_blocks = blocks_in_budget(args.kv_budget_mib, block_bytes);
    if (layout.num_blocks < 1) {
      throw Error("a KV budget of " + std::to_string(args.kv_budget_mib) + " MiB holds no block of " +
                  std::to_string(block_bytes) + " bytes; raise --kv-budget-mib");
    }
  } else {
    const int32_t capped = std::min(std::max(tokens, 1), model.context_length);
    layout.num_blocks = kv_blocks_for_sequence(model, args.block_size, capped, kCliLimits.step_token_budget);
  }
  config.device_pool = session.forward->kv_pool();
  if (config.device_pool) {
    const int32_t device_blocks = session.forward->max_kv_blocks(block_bytes);
    if (layout.num_blocks > device_blocks) {
      throw Error("the KV pool of " + std::to_string(layout.num_blocks) + " blocks does not fit the device beside the model (" +
                  std::to_string(device_blocks) + " blocks do); lower --kv-budget-mib");
    }
  } else {
    require_memory(uint64_t(layout.num_blocks) * block_bytes, available_memory_bytes(),
                   "the KV pool of " + std::to_string(layout.num_blocks) + " blocks");
  }
  session.kv = std::make_unique<KvCache>(model, config);
  session.core = std::make_unique<EngineCore>(*session.model, *session.forward, *session.kv, kCliLimits);
}

std::vector<int32_t> encode_prompt(const Model& model, const std::string& text, bool add_bos) {
  return model.tokenizer().encode(text, add_bos && model.tokenizer().bos_id() >= 0);
}

}  // namespace kvdesk::cli
