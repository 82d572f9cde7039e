// make-model's weight mixes: llama.cpp's per-tensor types for Q4_K_M / Q5_K_M / Q6_K, worked out
// by hand for TinyLlama's 22 layers, and the fallbacks for rows that do not fill a block.
#include <catch2/catch.hpp>

#include <string>

#include "engine/weight_mix.h"

using namespace kvdesk;

namespace {

const WeightMix& mix(const char* name) {
  const WeightMix* m = find_weight_mix(name);
  REQUIRE(m != nullptr);
  return *m;
}

}  // namespace

TEST_CASE("weight mixes are found by name and carry llama.cpp's file types", "[engine][weight_mix]") {
  CHECK(find_weight_mix("q4_k_x") == nullptr);
  CHECK(mix("f16").file_type == 1);
  CHECK(mix("q4_0").file_type == 2);
  CHECK(mix("q4_1").file_type == 3);
  CHECK(mix("q8_0").file_type == 7);
  CHECK(mix("q5_0").file_type == 8);
  CHECK(mix("q5_1").file_type == 9);
  CHECK(mix("q4_k_m").file_type == 15);
  CHECK(mix("q5_k_m").file_type == 17);
  CHECK(mix("q6_k").file_type == 18);
  CHECK(weight_mix_names().find("q4_k_m") != std::string::npos);
}

TEST_CASE("Q4_K_M gives attn_v and ffn_down Q6_K in llama.cpp's use_more_bits layers", "[engine][weight_mix]") {
  // 22 layers: layers < 22/8 = 2, layers >= 7*22/8 = 19, and (layer - 2) % 3 == 2.
  const bool more_bits[22] = {true,  true,  false, false, true,  false, false, true,  false, false, true,
                              false, false, true,  false, false, true,  false, false, true,  true,  true};
  const WeightMix& q4km = mix("q4_k_m");
  for (int layer = 0; layer < 22; ++layer) {
    INFO("layer " << layer);
    const GgmlType bumped = more_bits[layer] ? GgmlType::Q6_K : GgmlType::Q4_K;
    CHECK(tensor_type(q4km, TensorRole::AttnV, layer, 22, 2048) == bumped);
    CHECK(tensor_type(q4km, TensorRole::FfnDown, layer, 22, 5632) == bumped);
    CHECK(tensor_type(q4km, TensorRole::AttnQ, layer, 22, 2048) == GgmlType::Q4_K);
    CHECK(tensor_type(q4km, TensorRole::AttnK, layer, 22, 2048) == GgmlType::Q4_K);
    CHECK(tensor_type(q4km, TensorRole::AttnOutput, layer, 22, 2048) == GgmlType::Q4_K);
    CHECK(tensor_type(q4km, TensorRole::FfnGate, layer, 22, 2048) == GgmlType::Q4_K);
    CHECK(tensor_type(q4km, TensorRole::FfnUp, layer, 22, 2048) == GgmlType::Q4_K);
  }
  CHECK(tensor_type(q4km, TensorRole::Output, 0, 22, 2048) == GgmlType::Q6_K);
  CHECK(tensor_type(q4km, TensorRole::TokenEmbd, 0, 22, 2048) == GgmlType::Q4_K);
  CHECK(tensor_type(mix("q5_k_m"), TensorRole::FfnDown, 4, 22, 5632) == GgmlType::Q6_K);
  CHECK(tensor_type(mix("q5_k_m"), TensorRole::FfnDown, 5, 22, 5632) == GgmlType::Q5_K);
  CHECK(tensor_type(mix("q6_k"), TensorRole::AttnQ, 5, 22, 2048) == GgmlType::Q6_K);
  CHECK(tensor_type(mix("q6_k"), TensorRole::Output, 0, 22, 2048) == GgmlType::Q6_K);
}

TEST_CASE("rows that do not fill a super-block fall back as llama.cpp does", "[engine][weight_mix]") {
  // 4000 values: 125 blocks of 32 but not a multiple of 256; 100 values fit no quantized block.
  CHECK(tensor_type(mix("q4_k_m"), TensorRole::AttnQ, 3, 22, 4000) == GgmlType::Q5_0);
  CHECK(tensor_type(mix("q4_k_m"), TensorRole::FfnDown, 0, 22, 4000) == GgmlType::Q8_0);
  CHECK(tensor_type(mix("q4_k_m"), TensorRole::Output, 0, 22, 4000) == GgmlType::Q8_0);
  CHECK(tensor_type(mix("q5_k_m"), TensorRole::AttnQ, 3, 22, 4000) == GgmlType::Q5_1);
  CHECK(tensor_type(mix("q6_k"), TensorRole::AttnQ, 3, 22, 4000) == GgmlType::Q8_0);
  CHECK(tensor_type(mix("q4_k"), TensorRole::AttnQ, 3, 22, 4000) == GgmlType::Q5_0);
  CHECK(tensor_type(mix("q4_k_m"), TensorRole::AttnQ, 3, 22, 100) == GgmlType::F16);
  CHECK(tensor_type(mix("q4_0"), TensorRole::AttnQ, 3, 22, 100) == GgmlType::F16);
  CHECK(tensor_type(mix("f32"), TensorRole::AttnQ, 3, 22, 100) == GgmlType::F32);
}
