// The weight types make-model writes: one type for every 2-D tensor (like llama-quantize
// --pure), or one of llama.cpp's K-quant mixes (Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K) that pick a
// type per tensor from its role, its layer and the model's GQA ratio, with llama.cpp's
// fallbacks for rows that do not fit a block, or MXFP4_MOE (experts MXFP4, the rest Q8_0).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/ggml_types.h"

namespace kvdesk {

struct WeightMix {
  std::string_view name;   // as --type spells it: "q4_k_m"
  GgmlType base;           // the type of every 2-D tensor the mix does not single out
  uint32_t file_type;      // general.file_type (llama_ftype)
  bool k_mix;              // llama.cpp's per-tensor rules for file_type apply (output Q6_K, ...)
  bool more_bits;          // Q4_K_M / Q5_K_M: attn_v and ffn_down of some layers in Q6_K
  bool mxfp4_experts = false;   // MXFP4_MOE: a mixture's expert matrices in MXFP4 (gpt-oss's release)
};

// nullptr for an unknown name.
const WeightMix* find_weight_mix(std::string_view name);
// "f32, f16, ..., q6_k" for help texts and error messages.
std::string weight_mix_names();

enum class TensorRole { TokenEmbd, Output, AttnQ, AttnK, AttnV, AttnOutput, FfnGate, FfnUp, FfnDown };

// The type of one 2-D tensor with rows of `cols` values, in layer `layer` of `layers`
// (ignored for token_embd and output), in a model with `gqa` = heads / kv_heads.
GgmlType tensor_type(const WeightMix& mix, TensorRole role, int layer, int layers, int64_t cols, int gqa);

}  // namespace kvdesk
