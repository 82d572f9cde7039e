// ModelConfig: the hyperparameters of a Llama-family model (architecture.h), read from GGUF
// metadata ("<arch>.embedding_length", ...) and checked for consistency before any weight is
// touched. Multipliers that an architecture lacks are 1, soft caps and windows 0 (off).
#pragma once
#include <cstdint>
#include <string>

#include "engine/model/architecture.h"

namespace kvdesk {

class GgufFile;

struct ModelConfig {
  std::string architecture;     // "llama", "qwen2", "gemma2", ...
  Architecture traits;          // the family's optional pieces
  std::string name;             // general.name, may be empty
  int32_t context_length = 0;
  int32_t embedding_length = 0; // d_model
  int32_t block_count = 0;      // layers
  int32_t feed_forward_length = 0;
  int32_t head_count = 0;
  int32_t head_count_kv = 0;    // < head_count: GQA; 1: MQA
  int32_t head_dim = 0;
  int32_t rope_dimension_count = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f; // 1 / linear scaling factor
  ops::RopeMode rope_mode = ops::RopeMode::Normal;
  TensorPresence qkv_bias = TensorPresence::Optional;
  float rope_attn_factor = 1.0f;      // multiplies cos and sin (q and k both): LongRoPE, YaRN
  int32_t rope_original_context = 0;  // LongRoPE: past it the long factors apply; YaRN: the trained context
  // YaRN (rope.scaling.type yarn, ops::RopeParams): on when the ext factor is not 0; beta_fast
  // and beta_slow name the correction range over rope_original_context.
  float rope_yarn_ext_factor = 0.0f;
  float rope_yarn_beta_fast = 32.0f;
  float rope_yarn_beta_slow = 1.0f;
  float rms_eps = 1e-5f;
  int32_t vocab_size = 0;
  float attention_scale = 1.0f;       // s = attention_scale * dot(q, k)
  float attn_logit_softcap = 0;       // s = cap * tanh(s / cap) when > 0 (Gemma 2)
  float final_logit_softcap = 0;      // the same on the logits
  int32_t sliding_window = 0;         // tokens a local layer attends to, itself included
  float local_rope_freq_base = 10000.0f;  // RoPE base of local layers
  float embedding_scale = 1.0f;       // x = embedding * embedding_scale
  float residual_scale = 1.0f;        // x += block(x) * residual_scale (Granite)
  float logit_scale = 1.0f;           // logits = output / logit_scale (Granite)
  // Mixture of experts: each token's FFN is the weighted sum of expert_used_count of
  // expert_count expert FFNs of expert_feed_forward_length (engine/model/expert_routing.h);
  // expert_count 0: one dense FFN of feed_forward_length. A shared expert (Qwen2 MoE) is one
  // more FFN of expert_shared_feed_forward_length that every token runs; 0: none.
  int32_t expert_count = 0;
  int32_t expert_used_count = 0;
  int32_t expert_feed_forward_length = 0;
  int32_t expert_shared_feed_forward_length = 0;

  bool has_experts() const { return expert_count > 0; }

  // Whether layer l attends through a sliding window (architecture.h: local_pattern).
  bool is_local_layer(int32_t l) const {
    return sliding_window > 0 && traits.local_pattern > 0 && l % traits.local_pattern < traits.local_pattern - 1;
  }

  int32_t q_dim() const { return head_count * head_dim; }
  int32_t kv_dim() const { return head_count_kv * head_dim; }
  // Values of K and V stored per token across all layers: layers x 2 x kv_heads x head_dim.
  int64_t kv_values_per_token() const { return int64_t(block_count) * 2 * kv_dim(); }
};

// Throws kvdesk::Error naming the key or the inconsistency, or an unsupported architecture
// together with the supported ones.
ModelConfig read_model_config(const GgufFile& file);

// The RoPE settings of c's global layers, with freq_factors ([rope_dimension_count / 2] or null)
// wherever the caller keeps the rope_freqs tensor (host memory for the CPU, device memory for
// CUDA).
ops::RopeParams rope_params(const ModelConfig& c, const float* freq_factors);

// The RoPE settings of layer l: local layers may have their own base and no scaling (Gemma 3);
// a NoPE layer (SmolLM3) rotates nothing (n_rot 0).
ops::RopeParams layer_rope_params(const ModelConfig& c, const float* freq_factors, int32_t l);

}  // namespace kvdesk
