// Random-weight Llama-family GGUFs of real shapes (e.g. TinyLlama-1.1B: 22 layers, 2048, 32
// heads, 4 KV heads, 5632) with a real vocabulary (SentencePiece, or a Hugging Face
// byte-level BPE tokenizer.json), so tests and benchmarks measure realistic sizes and
// architectures (llama, Llama 3 RoPE scaling, qwen2, qwen3, qwen2moe, qwen3moe and
// Mixtral-style experts, gemma, gemma2, gemma3, phi3 with LongRoPE, granite, tied embeddings)
// without downloading a model.
// Tensor names, shapes and metadata keys are those llama.cpp's converter writes. Weights and
// biases ~ N(0, weight_std); block norms 1, the norms only newer families have (q/k, post)
// 1 + N(0, 0.1) as Gemma's converter stores them (1 + w).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/lab/weight_mix.h"

namespace kvdesk {

struct RandomModelSpec {
  int32_t layers = 2;
  int32_t embd = 256;
  int32_t heads = 4;
  int32_t kv_heads = 4;
  // 0: embd / heads; else each head's size apart from it, written as attention.key_length (Gemma
  // 7B's 16 x 256 over 3072, gpt-oss's 64 x 64 over 2880).
  int32_t head_dim = 0;
  int32_t ff = 704;
  int32_t context_length = 2048;
  float rope_freq_base = 10000.0f;
  // A SentencePiece .model file, or a Hugging Face byte-level BPE tokenizer.json (its
  // tokenizer_config.json and config.json read when beside it), written as llama.cpp's
  // converter writes it (hf_vocabulary.h).
  std::string vocab_from;
  WeightMix mix = *find_weight_mix("f16");  // types of the 2-D weights (engine/lab/weight_mix.h)
  uint64_t seed = 1;
  std::string name = "kvdesk-random";
  std::string arch = "llama";         // any of random_model_architectures()
  // "llama3": rope_freqs.weight as Llama 3.1's conversion writes it; "longrope" (phi3 only):
  // rope_factors_long/short with an original context of a quarter of context_length; "yarn":
  // YaRN of factor 4 over that original context.
  std::string rope_scaling = "none";
  bool tied_embeddings = false;       // no output.weight: logits come from token_embd (always for Gemma)
  int32_t sliding_window = 0;         // gemma2/gemma3 local layers' window; 0: 4096 / 512
  // A mixture of experts in every layer (qwen2moe and qwen3moe always; llama: Mixtral's layout):
  // experts_used of experts per token, each expert_ff wide (the Qwen MoEs) or ff wide (llama, as
  // Mixtral's are); qwen2moe adds a shared expert ff wide.
  int32_t experts = 0;
  int32_t experts_used = 2;
  int32_t expert_ff = 256;
  // llama only: each expert's matrices as tensors of their own (blk.N.ffn_gate.E.weight), as
  // Mixtral files converted before April 2024 store them, instead of stacked (ffn_gate_exps).
  bool split_experts = false;
  float weight_std = 0.02f;
};

// Llama 3.1's RoPE frequency factors ([n_rot/2]) as llama.cpp's convert_hf_to_gguf.py derives
// them (factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192): pairs whose
// wavelength is under 8192/4 keep their frequency (1), over 8192/1 are slowed 8x, and the band
// between blends smoothly.
std::vector<float> llama3_rope_factors(float freq_base, int n_rot);

// "llama, qwen2, qwen2moe, ...": the architectures make-model writes.
std::string random_model_architectures();
bool is_random_model_architecture(const std::string& arch);

// Throws kvdesk::Error on bad shapes, an unreadable vocabulary or I/O failure.
void write_random_model(const RandomModelSpec& spec, const std::string& out_path);

}  // namespace kvdesk
