// Per-tensor weight types after llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for the
// non-MoE, non-Falcon llama case: the rules for Q4_K_M, Q5_K_M and Q6_K, then
// tensor_type_fallback for rows whose length is not a multiple of the block.
#include "engine/weight_mix.h"

#include <array>

namespace kvdesk {
namespace {

// llama_ftype values: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9,
// Q4_K_S 14, Q4_K_M 15, Q5_K_S 16, Q5_K_M 17, Q6_K 18, BF16 32. A pure q4_k / q5_k file is
// labelled with the _S mix it mostly is.
constexpr std::array kMixes = {
    WeightMix{"f32", GgmlType::F32, 0, false, false},     WeightMix{"f16", GgmlType::F16, 1, false, false},
    WeightMix{"bf16", GgmlType::BF16, 32, false, false},  WeightMix{"q8_0", GgmlType::Q8_0, 7, false, false},
    WeightMix{"q4_0", GgmlType::Q4_0, 2, false, false},   WeightMix{"q4_1", GgmlType::Q4_1, 3, false, false},
    WeightMix{"q5_0", GgmlType::Q5_0, 8, false, false},   WeightMix{"q5_1", GgmlType::Q5_1, 9, false, false},
    WeightMix{"q4_k", GgmlType::Q4_K, 14, false, false},  WeightMix{"q5_k", GgmlType::Q5_K, 16, false, false},
    WeightMix{"q6_k", GgmlType::Q6_K, 18, true, false},   WeightMix{"q4_k_m", GgmlType::Q4_K, 15, true, true},
    WeightMix{"q5_k_m", GgmlType::Q5_K, 17, true, true},
};

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int layer, int layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// llama.cpp's choice before the shape check.
GgmlType preferred_type(const WeightMix& mix, TensorRole role, int layer, int layers, int64_t cols) {
  if (!mix.k_mix) return mix.base;
  switch (role) {
    case TensorRole::Output:
      // Rows that do not fit the mix's block go to Q8_0; otherwise Q6_K.
      return cols % ggml_type_info(mix.base).block_values != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    case TensorRole::AttnV:
    case TensorRole::FfnDown:
      return mix.more_bits && use_more_bits(layer, layers) ? GgmlType::Q6_K : mix.base;
    default: return mix.base;
  }
}

// tensor_type_fallback: K-quants whose rows do not fill 256-value super-blocks take the
// 32-value type of about the same size; anything still not fitting becomes F16.
GgmlType fitting_type(GgmlType type, int64_t cols) {
  if (cols % ggml_type_info(type).block_values == 0) return type;
  switch (type) {
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

GgmlType tensor_type(const WeightMix& mix, TensorRole role, int layer, int layers, int64_t cols) {
  return fitting_type(preferred_type(mix, role, layer, layers, cols), cols);
}

}  // namespace kvdesk
