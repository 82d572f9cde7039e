// kvdesk-cli make-model: write a random-weight Llama-family GGUF (llama, qwen2, qwen2moe, qwen3,
// qwen3moe, gemma, gemma2, gemma3, phi3, granite; experts for llama and the Qwen MoEs) of a chosen
// shape with a real vocabulary (a SentencePiece .model or a Hugging Face tokenizer.json), for
// tests and benchmarks at realistic sizes without downloads.
#include <chrono>
#include <cstdio>

#include "app/cli/cli_common.h"
#include "engine/error.h"
#include "engine/lab/random_model.h"

namespace kvdesk::cli {
namespace {

struct MakeModelArgs {
  RandomModelSpec spec;
  std::string type = "f16";
  std::string out_path;
};

WeightMix parse_weight_mix(const std::string& name) {
  const WeightMix* mix = find_weight_mix(name);
  if (!mix) throw UsageError("unknown weight type '" + name + "' (choose one of " + weight_mix_names() + ")");
  return *mix;
}

int run_make_model(MakeModelArgs& a) {
  a.spec.mix = parse_weight_mix(a.type);
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
  cmd->add_option("--head-dim", s.head_dim, "Each head's size when not embd / heads (attention.key_length); 0: embd / heads")
      ->capture_default_str();
  cmd->add_option("--ff", s.ff, "Feed-forward size")->capture_default_str();
  cmd->add_option("--ctx", s.context_length, "Context length")->check(CLI::Range(16, 1 << 24))->capture_default_str();
  cmd->add_option("--vocab-from", s.vocab_from,
                  "SentencePiece .model, or a Hugging Face byte-level BPE tokenizer.json (written as llama.cpp's "
                  "converter writes it; tokenizer_config.json beside it gives BOS/EOS and the chat template)")
      ->required();
  cmd->add_option("--type", args->type,
                  "Weight type, or a llama.cpp mix (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k): " + weight_mix_names())->capture_default_str();
  cmd->add_option("--arch", s.arch, "Architecture: " + random_model_architectures())
      ->check([](const std::string& arch) {
        return is_random_model_architecture(arch) ? std::string()
                                                  : "'" + arch + "' is not one of " + random_model_architectures();
      })->capture_default_str();
  cmd->add_option("--rope-scaling", s.rope_scaling,
                  "none, llama3 (Llama 3.1 rope_freqs factors), longrope (phi3: rope_factors_long/short) or yarn "
                  "(factor 4 over a quarter of --ctx)")
      ->check(CLI::IsMember({"none", "llama3", "longrope", "yarn"}))->capture_default_str();
  cmd->add_option("--rope-base", s.rope_freq_base, "rope.freq_base")->capture_default_str();
  cmd->add_option("--sliding-window", s.sliding_window, "gemma2/gemma3: local layers' window (0: 4096 / 512)")
      ->capture_default_str();
  cmd->add_option("--experts", s.experts,
                  "A mixture of this many experts per layer (qwen2moe, qwen3moe; llama: Mixtral's layout)")
      ->capture_default_str();
  cmd->add_option("--experts-used", s.experts_used, "Experts each token runs")->capture_default_str();
  cmd->add_option("--expert-ff", s.expert_ff,
                  "Each expert's feed-forward size (the Qwen MoEs; a llama's experts, and qwen2moe's shared "
                  "expert, are --ff wide)")
      ->capture_default_str();
  cmd->add_flag("--split-experts", s.split_experts,
                "llama with --experts: one tensor per expert matrix (blk.N.ffn_gate.E.weight), as older Mixtral files");
  cmd->add_flag("--tied-embeddings", s.tied_embeddings, "No output.weight: logits use token_embd");
  cmd->add_option("--weight-std", s.weight_std,
                  "Standard deviation of the random weights (larger: sharper attention, larger logits)")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->add_option("--name", s.name, "general.name")->capture_default_str();
  cmd->add_option("-o,--output", args->out_path, "Output .gguf")->required();
  return Command{cmd, [args] { return run_make_model(*args); }};
}

}  // namespace kvdesk::cli
