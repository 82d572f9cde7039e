// Architecture: the Llama-family architectures kvdesk runs and the ways their blocks differ.
// A GGUF names its architecture in general.architecture, and that name is also the prefix of
// its hyperparameter keys ("qwen2.embedding_length"). Every architecture here is the same
// pre-norm decoder (embed -> per layer: attention block, FFN block -> norm -> logits); the
// traits below say which optional pieces a family adds, as llama.cpp's llama-model builds it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/ops.h"

namespace kvdesk {

// Whether the architecture requires a tensor in the file, merely allows it, or never has it.
enum class TensorPresence { Absent, Optional, Required };

// The gated FFN's activation: h = act(x Wgate) * (x Wup).
enum class FfnActivation {
  Silu,      // SwiGLU: Llama, Qwen, Phi-3, Granite
  GeluTanh,  // GeGLU with GELU's tanh approximation: Gemma (1, 2, 3)
  SwigluOai, // SwiGLU with the gate and up clamped, sigmoid(1.702 g), up + 1: gpt-oss (ops::swiglu_oai)
};

struct Architecture {
  std::string_view name;
  ops::RopeMode rope_mode;
  TensorPresence qkv_bias;       // blk.N.attn_{q,k,v}.bias, added after the projections
  TensorPresence qk_norm;        // blk.N.attn_{q,k}_norm: an RMS norm per head before RoPE
  bool post_norms = false;       // blk.N.post_attention_norm / post_ffw_norm on each block's output
  bool fused_projections = false;  // blk.N.attn_qkv [q|k|v] and ffn_up [gate|up] (Phi-3)
  FfnActivation ffn_activation = FfnActivation::Silu;
  bool embedding_times_sqrt_dim = false;  // x = embedding * sqrt(d_model) (Gemma)
  bool granite_multipliers = false;       // embedding, residual, attention and logit scales
  // Sliding-window layers: with a window in the file, layer l is local when
  // l % local_pattern < local_pattern - 1 (2: even layers; 6: five local, then one global).
  // 0: every layer is global.
  int32_t local_pattern = 0;
  float local_rope_freq_base = 0;  // RoPE base of local layers; 0: the model's rope.freq_base
  bool gemma_attention_scale = false;  // 1/sqrt(head_dim), or 1/sqrt(d_model/heads) at 27B
  bool gemma2_softcapping = false;     // attention and final logit soft-capping
  // A mixture of experts in place of the FFN (<arch>.expert_count, blk.N.ffn_*_exps): Qwen2 and
  // Qwen3 MoE always, Llama when the file has experts (Mixtral).
  TensorPresence experts = TensorPresence::Absent;
  // The chosen experts' weights: their softmax over the k chosen scores (Mixtral, Qwen3 MoE), or
  // their probability among all experts as it is (Qwen2 MoE: the k weights sum to less than 1).
  bool expert_weights_renormalized = true;
  // Qwen2 MoE: a shared expert every token runs beside its routed ones (blk.N.ffn_*_shexp, of
  // <arch>.expert_shared_feed_forward_length), its output gated by sigmoid(x . ffn_gate_inp_shexp).
  bool shared_expert = false;
  // gpt-oss: biases on the attention output (blk.N.attn_output.bias), the router
  // (ffn_gate_inp.bias) and every expert matrix (ffn_{gate,up,down}_exps.bias, [experts][rows]),
  // and a sink logit per query head in the attention softmax (blk.N.attn_sinks).
  bool output_and_expert_biases = false;
  bool attention_sinks = false;
  // The FFN block's input norm, blk.N.<name>.weight: gpt-oss names it post_attention_norm.
  std::string_view ffn_norm_name = "ffn_norm";
  // NoPE layers: layer l rotates no q or k when (l + 1) % no_rope_layer_step == 0 (SmolLM3: 4,
  // a constant of the architecture that files do not carry); 0: every layer rotates.
  int32_t no_rope_layer_step = 0;
};

// The architecture of that name, or nullptr when kvdesk cannot run it.
const Architecture* find_architecture(std::string_view name);

// "llama, qwen2, ...": for messages.
std::string supported_architecture_names();

}  // namespace kvdesk
