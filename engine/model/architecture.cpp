// The table of supported architectures, after llama.cpp's llama-arch / llama-model: Llama
// (and Granite, Mistral's tekken models) rotate adjacent pairs; the rest rotate NeoX-style
// halves. Qwen2 always has Q/K/V biases, Qwen3 and Gemma 3 normalize each q/k head, Gemma 2/3
// wrap both blocks in pre and post norms, Phi-3 fuses its projections, Qwen3 MoE (and Mixtral,
// a Llama with experts) routes each token to a few of many FFNs.
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

Architecture qwen3moe() {
  Architecture a{"qwen3moe", ops::RopeMode::Neox, Absent, Required};
  a.experts = Required;
  return a;
}

Architecture gemma(std::string_view name, TensorPresence qk_norm, int32_t local_pattern) {
  Architecture a{name, ops::RopeMode::Neox, Absent, qk_norm};
  a.post_norms = true;
  a.ffn_activation = FfnActivation::GeluTanh;
  a.embedding_times_sqrt_dim = true;
  a.local_pattern = local_pattern;
  a.gemma_attention_scale = true;
  return a;
}

Architecture gemma2() {
  Architecture a = gemma("gemma2", Absent, 2);
  a.gemma2_softcapping = true;
  return a;
}

Architecture gemma3() {
  Architecture a = gemma("gemma3", Required, 6);
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

const Architecture kArchitectures[] = {llama(), qwen2(), qwen3(), qwen3moe(), gemma2(), gemma3(), phi3(), granite()};

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
