// The table of supported architectures, after llama.cpp's llama-arch / llama-model: Llama
// (and Granite, Mistral's tekken models) rotate adjacent pairs; the rest rotate NeoX-style
// halves. Qwen2 always has Q/K/V biases, Qwen3 and Gemma 3 normalize each q/k head, Gemma 2/3
// wrap both blocks in pre and post norms (Gemma 1 has neither), Phi-3 fuses its projections,
// Qwen2 and Qwen3 MoE (and Mixtral, a Llama with experts) route each token to a few of many FFNs,
// Qwen2 MoE beside a shared one.
#include "engine/model/architecture.h"

namespace kvdesk {
namespace {

using enum TensorPresence;

Architecture llama() {
  Architecture a{"llama", ops::RopeMode::Normal, Optional, Absent};
  a.experts = Optional;
  return a;
}

Architecture qwen2() { return {"qwen2", ops::RopeMode::Neox, Required, Absent}; }
Architecture qwen3() { return {"qwen3", ops::RopeMode::Neox, Absent, Required}; }

Architecture qwen2moe() {
  Architecture a{"qwen2moe", ops::RopeMode::Neox, Required, Absent};
  a.experts = Required;
  a.expert_weights_renormalized = false;
  a.shared_expert = true;
  return a;
}

Architecture qwen3moe() {
  Architecture a{"qwen3moe", ops::RopeMode::Neox, Absent, Required};
  a.experts = Required;
  return a;
}

// What every Gemma shares: NeoX RoPE, GeGLU, the embedding times sqrt(d_model), Gemma's q scale.
Architecture gemma_family(std::string_view name, TensorPresence qk_norm, int32_t local_pattern) {
  Architecture a{name, ops::RopeMode::Neox, Absent, qk_norm};
  a.ffn_activation = FfnActivation::GeluTanh;
  a.embedding_times_sqrt_dim = true;
  a.local_pattern = local_pattern;
  a.gemma_attention_scale = true;
  return a;
}

// Gemma 1 (and CodeGemma): the family alone, without post norms, windows or soft caps.
Architecture gemma() { return gemma_family("gemma", Absent, 0); }

Architecture gemma2() {
  Architecture a = gemma_family("gemma2", Absent, 2);
  a.post_norms = true;
  a.gemma2_softcapping = true;
  return a;
}

Architecture gemma3() {
  Architecture a = gemma_family("gemma3", Required, 6);
  a.post_norms = true;
  a.local_rope_freq_base = 10000.0f;
  return a;
}

Architecture phi3() {
  Architecture a{"phi3", ops::RopeMode::Neox, Absent, Absent};
  a.fused_projections = true;
  return a;
}

Architecture granite() {
  Architecture a{"granite", ops::RopeMode::Normal, Optional, Absent};
  a.granite_multipliers = true;
  return a;
}

// gpt-oss (OpenAI's open-weight MoE): Qwen2-style q/k/v biases and NeoX RoPE (with YaRN in its
// files), every other layer a sliding window (layer 0 local), attention sinks, 1/sqrt(head_dim)
// with a head_dim apart from d_model / heads, biased routing over experts of clamped SwiGLU.
Architecture gpt_oss() {
  Architecture a{"gpt-oss", ops::RopeMode::Neox, Required, Absent};
  a.experts = Required;
  a.local_pattern = 2;
  a.ffn_activation = FfnActivation::SwigluOai;
  a.output_and_expert_biases = true;
  a.attention_sinks = true;
  a.ffn_norm_name = "post_attention_norm";
  return a;
}

// SmolLM3: Llama whose every fourth layer has no positional encoding (llama.cpp's
// n_no_rope_layer_step = 4, which the converter does not write).
Architecture smollm3() {
  Architecture a{"smollm3", ops::RopeMode::Normal, Optional, Absent};
  a.no_rope_layer_step = 4;
  return a;
}

const Architecture kArchitectures[] = {llama(),  qwen2(),  qwen2moe(), qwen3(),   qwen3moe(), gemma(),
                                       gemma2(), gemma3(), phi3(),     granite(), gpt_oss(),  smollm3()};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string supported_architecture_names() {
  std::string names;
  for (const Architecture& a : kArchitectures) {
    if (!names.empty()) names += ", ";
    names += a.name;
  }
  return names;
}

}  // namespace kvdesk
