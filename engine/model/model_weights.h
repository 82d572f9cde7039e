// ModelWeights: typed views of a Llama-family model's tensors inside the mapped GGUF file.
// Weights stay in their stored type (F32/F16/BF16/Q8_0/Q4_0); nothing is dequantized at load.
// Every tensor's presence (per architecture), type and shape is checked against the
// ModelConfig here, once. Fused tensors (Phi-3's attn_qkv, ffn_up) are bound as row ranges, so
// the forward pass sees separate q/k/v and gate/up matrices for every architecture.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "kernels/dot.h"
#include "kernels/ggml_types.h"

namespace kvdesk {

class GgufFile;
class LoadProgress;

// A matrix W[rows][cols] (ggml dims {cols, rows}) in its stored type.
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
};

// One expert's FFN: its rows of the file's stacked [experts][rows][cols] tensors, and its rows
// of the stacked [experts][rows] biases where the architecture has them (gpt-oss).
struct ExpertWeights {
  WeightMatrix gate;                  // [expert_ff][d_model]
  WeightMatrix up;                    // [expert_ff][d_model]
  WeightMatrix down;                  // [d_model][expert_ff]
  const float* gate_bias = nullptr;   // [expert_ff] or null
  const float* up_bias = nullptr;     // [expert_ff] or null
  const float* down_bias = nullptr;   // [d_model] or null
};

struct LayerWeights {
  const float* attn_norm = nullptr;   // [d_model]
  WeightMatrix wq;                    // [q_dim][d_model]
  WeightMatrix wk;                    // [kv_dim][d_model]
  WeightMatrix wv;                    // [kv_dim][d_model]
  const float* bq = nullptr;          // [q_dim] or null (no bias)
  const float* bk = nullptr;          // [kv_dim] or null
  const float* bv = nullptr;          // [kv_dim] or null
  const float* q_norm = nullptr;      // [head_dim] RMS norm of each q head before RoPE, or null
  const float* k_norm = nullptr;      // [head_dim] the same for k heads, or null
  WeightMatrix wo;                    // [d_model][q_dim]
  const float* bo = nullptr;          // [d_model] or null
  const float* attn_sinks = nullptr;  // [heads] each head's sink logit (AttentionArgs::sinks), or null
  const float* attn_post_norm = nullptr;  // [d_model] norm of the attention output, or null
  const float* ffn_norm = nullptr;    // [d_model]
  WeightMatrix w_gate;                // [d_ff][d_model]
  WeightMatrix w_up;                  // [d_ff][d_model]
  WeightMatrix w_down;                // [d_model][d_ff]
  // A mixture of experts in place of w_gate, w_up and w_down, which are then empty or hold the
  // shared expert (Qwen2 MoE, [expert_shared_ff] rows): the router scores each token against
  // every expert (ffn_gate_inp), shared_gate scores how much of the shared expert it takes.
  WeightMatrix router;                // [experts][d_model]
  const float* router_bias = nullptr; // [experts] or null
  std::vector<ExpertWeights> experts; // [experts]; empty in a dense layer
  WeightMatrix shared_gate;           // [1][d_model], or empty without a shared expert
  const float* ffn_post_norm = nullptr;   // [d_model] norm of the FFN output, or null
};

struct ModelWeights {
  WeightMatrix token_embd;            // [vocab][d_model]
  std::vector<LayerWeights> layers;   // [block_count]
  const float* output_norm = nullptr; // [d_model]
  WeightMatrix output;                // [vocab][d_model]; token_embd when the file ties them
  bool tied_output = false;
  // [rope_dimension_count / 2] per-pair frequency divisors, or null: Llama 3's rope_freqs, or
  // Phi-3's rope_factors_long when the context is past the original one, else rope_factors_short.
  const float* rope_freqs = nullptr;
  int64_t num_parameters = 0;
  uint64_t weight_bytes = 0;
};

// Bytes one decode step reads from the weights for one token: every layer's matrices (of a
// MoE layer the router and experts_used experts), norms and biases, the output norm and
// matrix, and one embedding row. Decode is bound by reading
// these (plus the context's KV) once per token.
uint64_t decode_weight_read_bytes(const ModelWeights& weights, const ModelConfig& config);

// Throws kvdesk::Error naming the tensor: missing, wrong shape, or a type kvdesk cannot run.
ModelWeights bind_model_weights(const GgufFile& file, const ModelConfig& config);

// Rewrites, in place, every layer matrix and the untied output matrix that has an interleaved
// layout for the GEMM (kernels/weight_repack.h, decided by repacked_type) that pays on `isa`
// (cpu_layout_pays) and gives it that type; the token embedding, read row by row, keeps the
// file's. Only inside GgufFile::rewrite_tensor_data. Returns how many matrices changed.
// Repacking is one stage of the load (`share` of it, by bytes repacked), cancelled between
// matrices.
int repack_matrices(ModelWeights& weights, CpuIsa isa, LoadProgress& progress, double share);

}  // namespace kvdesk
