// Per-tensor weight types after llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for the
// non-MoE, non-Falcon, non-70B llama case: the rules for Q2_K, Q3_K_M, Q4_K_M, Q5_K_M and Q6_K,
// then tensor_type_fallback for rows whose length is not a multiple of the block.
#include "engine/lab/weight_mix.h"

#include <array>

namespace kvdesk {
namespace {

// llama_ftype values: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10,
// Q3_K_S 11, Q3_K_M 12, Q4_K_S 14, Q4_K_M 15, Q5_K_S 16, Q5_K_M 17, Q6_K 18, IQ4_NL 25,
// IQ4_XS 30, BF16 32, MXFP4_MOE 38. A pure q3_k / q4_k / q5_k file is labelled with the _S mix it mostly is.
constexpr uint32_t kFtypeQ2_K = 10;
constexpr uint32_t kFtypeQ3_K_M = 12;
constexpr uint32_t kFtypeMxfp4Moe = 38;
constexpr std::array kMixes = {
    WeightMix{"f32", GgmlType::F32, 0, false, false},     WeightMix{"f16", GgmlType::F16, 1, false, false},
    WeightMix{"bf16", GgmlType::BF16, 32, false, false},  WeightMix{"q8_0", GgmlType::Q8_0, 7, false, false},
    WeightMix{"q4_0", GgmlType::Q4_0, 2, false, false},   WeightMix{"q4_1", GgmlType::Q4_1, 3, false, false},
    WeightMix{"q5_0", GgmlType::Q5_0, 8, false, false},   WeightMix{"q5_1", GgmlType::Q5_1, 9, false, false},
    WeightMix{"q4_k", GgmlType::Q4_K, 14, false, false},  WeightMix{"q5_k", GgmlType::Q5_K, 16, false, false},
    WeightMix{"q6_k", GgmlType::Q6_K, 18, true, false},   WeightMix{"q4_k_m", GgmlType::Q4_K, 15, true, true},
    WeightMix{"q5_k_m", GgmlType::Q5_K, 17, true, true},  WeightMix{"q3_k", GgmlType::Q3_K, 11, false, false},
    WeightMix{"q3_k_m", GgmlType::Q3_K, kFtypeQ3_K_M, true, false},
    WeightMix{"q2_k", GgmlType::Q2_K, kFtypeQ2_K, true, false},
    WeightMix{"iq4_nl", GgmlType::IQ4_NL, 25, false, false}, WeightMix{"iq4_xs", GgmlType::IQ4_XS, 30, false, false},
    WeightMix{"mxfp4_moe", GgmlType::Q8_0, kFtypeMxfp4Moe, false, false, true},
};

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int layer, int layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// attn_v of layer `layer` (llama.cpp counts attn_v tensors, one per layer).
GgmlType attn_v_type(const WeightMix& mix, int layer, int layers, int gqa) {
  if (mix.file_type == kFtypeQ2_K) return gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
  if (mix.file_type == kFtypeQ3_K_M) return layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
  return mix.more_bits && use_more_bits(layer, layers) ? GgmlType::Q6_K : mix.base;
}

GgmlType ffn_down_type(const WeightMix& mix, int layer, int layers) {
  if (mix.file_type == kFtypeQ2_K) return GgmlType::Q3_K;
  if (mix.file_type == kFtypeQ3_K_M) return layer < layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
  return mix.more_bits && use_more_bits(layer, layers) ? GgmlType::Q6_K : mix.base;
}

GgmlType attn_output_type(const WeightMix& mix) {
  if (mix.file_type == kFtypeQ2_K) return GgmlType::Q3_K;
  if (mix.file_type == kFtypeQ3_K_M) return GgmlType::Q4_K;
  return mix.base;
}

// llama.cpp's choice before the shape check.
GgmlType preferred_type(const WeightMix& mix, TensorRole role, int layer, int layers, int64_t cols, int gqa) {
  if (!mix.k_mix) return mix.base;
  switch (role) {
    case TensorRole::Output:
      // Rows that do not fit the mix's block go to Q8_0; otherwise Q6_K.
      return cols % ggml_type_info(mix.base).block_values != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    case TensorRole::AttnV: return attn_v_type(mix, layer, layers, gqa);
    case TensorRole::FfnDown: return ffn_down_type(mix, layer, layers);
    case TensorRole::AttnOutput: return attn_output_type(mix);
    default: return mix.base;
  }
}

// tensor_type_fallback: K-quants whose rows do not fill 256-value super-blocks take the
// 32-value type of about the same size (IQ4_NL for the types under 4.5 bits); anything still
// not fitting becomes F16.
GgmlType fitting_type(GgmlType type, int64_t cols) {
  if (cols % ggml_type_info(type).block_values == 0) return type;
  switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::IQ4_XS: type = GgmlType::IQ4_NL; break;
    case GgmlType::Q4_K: type = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: type = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: type = GgmlType::Q8_0; break;
    default: break;
  }
  return cols % ggml_type_info(type).block_values == 0 ? type : GgmlType::F16;
}

}  // namespace

const WeightMix* find_weight_mix(std::string_view name) {
  for (const WeightMix& mix : kMixes) {
    if (mix.name == name) return &mix;
  }
  return nullptr;
}

std::string weight_mix_names() {
  std::string names;
  for (const WeightMix& mix : kMixes) names += (names.empty() ? "" : ", ") + std::string(mix.name);
  return names;
}

GgmlType tensor_type(const WeightMix& mix, TensorRole role, int layer, int layers, int64_t cols, int gqa) {
  return fitting_type(preferred_type(mix, role, layer, layers, cols, gqa), cols);
}

}  // namespace kvdesk
