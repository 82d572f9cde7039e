// Shared pieces of the kvdesk-cli subcommands: the model/KV/thread options every command
// takes, opening a model with a KV pool sized for the run, and the command registry.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/engine_types.h"
#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"
#include "engine/runtime/sync_driver.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::cli {

// A value the command line gave that CLI11 could not judge (an unknown KV or weight type,
// out-of-range sampling): kvdesk-cli prints it with the subcommand's usage line and exits 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// A registered subcommand: what to run once the command line is parsed. Returns the exit code.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

struct ModelArgs {
  std::string model_path;
  std::string tokenizer_path;
  BackendRequest backend = BackendRequest::Auto;
  int threads = 0;              // 0: all cores
  std::string kv_type = "f16";
  std::string kv_type_k;        // empty: kv_type
  std::string kv_type_v;        // empty: kv_type
  int block_size = 16;
  int kv_recent = kKvRecentRows;   // newest rows per sequence kept in f32 for low-bit KV
  std::string attn_numerics = "exact";
  double kv_budget_mib = 0;     // 0: a pool just big enough for the run
  double host_tier_mib = double(kDefaultHostTierMib);   // host memory for KV out of the pool; 0: none
  int host_tier_zstd = 0;       // zstd level of the host tier's blocks; 0: kept as stored
};

// KV retention (engine/kv/kv_retention.h): --retention POLICY --kv-keep FRACTION|TOKENS.
struct RetentionArgs {
  std::string policy = "none";
  std::string keep = "0.5";
};
void add_retention_options(CLI::App* cmd, RetentionArgs& args);
// Throws kvdesk::Error naming the bad policy or budget.
RetentionOptions retention_options(const RetentionArgs& args);

// --kv-recent N (KvLayout::recent_rows).
void add_kv_recent_option(CLI::App* cmd, ModelArgs& args);
// --block-size: one of kKvBlockSizes.
CLI::Validator block_size_check();

// Sampling flags (--temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed) with
// llama.cpp's defaults; without --seed, resolve_sampling picks a random one.
struct SamplingArgs {
  SamplingParams params;
  bool seed_given = false;
};
void add_sampling_options(CLI::App* cmd, SamplingArgs& args);
// Throws UsageError for an out-of-range value.
SamplingParams resolve_sampling(SamplingArgs& args);

// --chat-template NAME (a built-in family) or --chat-template-file FILE.jinja (llama-server's
// flag): what renders messages instead of the model's own template; neither: the model's.
struct ChatTemplateArgs {
  std::string name;
  std::string file;
};
void add_chat_template_options(CLI::App* cmd, ChatTemplateArgs& args);
// A whole text file (a template, a conversation); throws Error naming the file.
std::string read_text_file(const std::string& path, const char* what);

// The in-process Engine's settings the model, KV and template flags ask for (the template
// file read here: throws Error when it cannot be).
EngineSettings engine_settings(const ModelArgs& args, const ChatTemplateArgs& chat_template);

void add_model_options(CLI::App* cmd, ModelArgs& args);
void add_kv_options(CLI::App* cmd, ModelArgs& args);

KvType parse_kv_type(const std::string& name);   // throws UsageError
// The KV types, block size and attention numerics the options ask for (num_blocks left 0).
KvLayout kv_layout(const ModelArgs& args);
int resolve_threads(int requested);

// Prompt tokens per forward pass in the CLI's runs: whole prompts of the usual lengths at once.
inline constexpr SchedulerLimits kCliLimits{512, 32, PreemptMode::Recompute};

// A loaded model on its backend, its thread pool, the backend's forward pass, and (after
// size_kv_cache) a single-user KV pool where that forward pass reads it, with the engine step
// over them, run on this thread (engine/runtime/sync_driver.h).
struct Session {
  BackendChoice backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<ForwardBackend> forward;   // over model and pool (on CUDA: the weights uploaded)
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<EngineCore> core;
};
// Chooses the backend (an explicit cuda that cannot run throws kvdesk::Error before anything
// loads), loads the model and prints the backend's note, if any, as one line on stderr.
Session open_session(const ModelArgs& args);
// Creates the KV pool and the engine step over it: --kv-budget-mib's worth of blocks, or else room for `tokens` tokens
// (capped at the model's context), in the forward pass's memory. Throws kvdesk::Error when the
// budget holds no block or the pool does not fit that memory.
void size_kv_cache(Session& session, const ModelArgs& args, int32_t tokens);
// Whole blocks of block_bytes in budget_mib MiB (clamped to what an int32 block id can name).
int32_t blocks_in_budget(double budget_mib, size_t block_bytes);

std::vector<int32_t> encode_prompt(const Model& model, const std::string& text, bool add_bos);

Command add_generate_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_logits_command(CLI::App& app);
Command add_make_model_command(CLI::App& app);
Command add_conversations_command(CLI::App& app);
Command add_replay_command(CLI::App& app);
Command add_perplexity_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_template_command(CLI::App& app);
Command add_models_command(CLI::App& app);

}  // namespace kvdesk::cli
