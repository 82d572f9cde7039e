// Options and model opening shared by the kvdesk-cli subcommands.
#include "app/cli/cli_common.h"

#include <algorithm>
#include <thread>

#include "engine/error.h"

namespace kvdesk::cli {

void add_model_options(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("-m,--model", args.model_path, "GGUF model file")->required();
  cmd->add_option("--tokenizer", args.tokenizer_path,
                  "SentencePiece .model file to use instead of the GGUF vocabulary");
  cmd->add_option("-t,--threads", args.threads, "CPU threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
}

void add_kv_options(CLI::App* cmd, ModelArgs& args) {
  cmd->add_option("--kv-type", args.kv_type, "KV cache storage type: f32, f16, bf16")
      ->capture_default_str();
  cmd->add_option("--block-size", args.block_size, "KV block size in tokens")
      ->check(CLI::IsMember({8, 16, 32, 64, 128}))
      ->capture_default_str();
  cmd->add_option("--attn-numerics", args.attn_numerics,
                  "exact (f32 math) or llamacpp (f16 rounding as llama.cpp's CPU flash attention)")
      ->check(CLI::IsMember({"exact", "llamacpp"}))
      ->capture_default_str();
}

KvType parse_kv_type(const std::string& name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::BF16}) {
    if (name == kv_type_name(t)) return t;
  }
  throw Error("unknown KV type '" + name + "' (choose f32, f16 or bf16)");
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return std::max(1, int(std::thread::hardware_concurrency()));
}

Session open_session(const ModelArgs& args) {
  Session s;
  s.model = Model::load(args.model_path, ModelLoadOptions{args.tokenizer_path});
  s.pool = std::make_unique<ThreadPool>(resolve_threads(args.threads));
  return s;
}

void size_kv_cache(Session& session, const ModelArgs& args, int32_t tokens) {
  const KvType kv_type = parse_kv_type(args.kv_type);
  KvLayout kv_options;
  kv_options.k_type = kv_type;
  kv_options.v_type = kv_type;
  kv_options.block_size = args.block_size;
  kv_options.numerics = args.attn_numerics == "llamacpp" ? AttentionNumerics::LlamaCpp : AttentionNumerics::Exact;
  const int32_t capped = std::min(std::max(tokens, 1), session.model->config().context_length);
  kv_options.num_blocks = (capped + args.block_size - 1) / args.block_size;
  session.kv = std::make_unique<KvCache>(session.model->config(), kv_options);
}

std::vector<int32_t> encode_prompt(const Model& model, const std::string& text, bool add_bos) {
  return model.tokenizer().encode(text, add_bos && model.tokenizer().bos_id() >= 0);
}

}  // namespace kvdesk::cli
