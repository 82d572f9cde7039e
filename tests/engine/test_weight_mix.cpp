// make-model's weight mixes: llama.cpp's per-tensor types for Q2_K / Q3_K_M / Q4_K_M / Q5_K_M /
// Q6_K, worked out by hand for TinyLlama's 22 layers, and the fallbacks for rows that do not fill
// a block.
#include <catch2/catch.hpp>

#include <string>

#include "engine/lab/weight_mix.h"

using namespace kvdesk;

namespace {

const WeightMix& mix(const char* name) {
  const WeightMix* m = find_weight_mix(name);
  REQUIRE(m != nullptr);
  return *m;
}

// TinyLlama's shapes: 22 layers, rows of 2048 values (ffn_down: 5632), GQA 8.
constexpr int kLayers = 22;
GgmlType tinyllama_type(const WeightMix& m, TensorRole role, int layer) {
  return tensor_type(m, role, layer, kLayers, role == TensorRole::FfnDown ? 5632 : 2048, 8);
}

// The expected types of one layer's 2-D tensors.
struct LayerTypes {
  GgmlType attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down;
};

void check_tinyllama_layer(const WeightMix& m, int layer, const LayerTypes& want) {
  INFO("layer " << layer);
  CHECK(tinyllama_type(m, TensorRole::AttnQ, layer) == want.attn_q);
  CHECK(tinyllama_type(m, TensorRole::AttnK, layer) == want.attn_k);
  CHECK(tinyllama_type(m, TensorRole::AttnV, layer) == want.attn_v);
  CHECK(tinyllama_type(m, TensorRole::AttnOutput, layer) == want.attn_output);
  CHECK(tinyllama_type(m, TensorRole::FfnGate, layer) == want.ffn_gate);
  CHECK(tinyllama_type(m, TensorRole::FfnUp, layer) == want.ffn_up);
  CHECK(tinyllama_type(m, TensorRole::FfnDown, layer) == want.ffn_down);
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
  for (int layer = 0; layer < kLayers; ++layer) {
    const GgmlType bumped = more_bits[layer] ? GgmlType::Q6_K : GgmlType::Q4_K;
    const GgmlType q4 = GgmlType::Q4_K;
    check_tinyllama_layer(q4km, layer, {q4, q4, bumped, q4, q4, q4, bumped});
  }
  CHECK(tinyllama_type(q4km, TensorRole::Output, 0) == GgmlType::Q6_K);
  CHECK(tinyllama_type(q4km, TensorRole::TokenEmbd, 0) == GgmlType::Q4_K);
  CHECK(tinyllama_type(mix("q5_k_m"), TensorRole::FfnDown, 4) == GgmlType::Q6_K);
  CHECK(tinyllama_type(mix("q5_k_m"), TensorRole::FfnDown, 5) == GgmlType::Q5_K);
  CHECK(tinyllama_type(mix("q6_k"), TensorRole::AttnQ, 5) == GgmlType::Q6_K);
  CHECK(tinyllama_type(mix("q6_k"), TensorRole::Output, 0) == GgmlType::Q6_K);
}

TEST_CASE("Q3_K_M follows llama.cpp: attn_v Q5_K then Q4_K, attn_output Q4_K, ffn_down Q5_K early", "[engine][weight_mix]") {
  // 22 layers: attn_v of layers 0, 1 in Q5_K; ffn_down of layers < 22/16 = 1 in Q5_K, the rest
  // Q4_K (the Q3_K branch is Falcon's); output Q6_K; everything else Q3_K.
  const WeightMix& q3km = mix("q3_k_m");
  CHECK(q3km.file_type == 12);
  for (int layer = 0; layer < kLayers; ++layer) {
    const GgmlType q3 = GgmlType::Q3_K;
    const GgmlType attn_v = layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    const GgmlType ffn_down = layer < 1 ? GgmlType::Q5_K : GgmlType::Q4_K;
    check_tinyllama_layer(q3km, layer, {q3, q3, attn_v, GgmlType::Q4_K, q3, q3, ffn_down});
  }
  CHECK(tinyllama_type(q3km, TensorRole::Output, 0) == GgmlType::Q6_K);
  CHECK(tinyllama_type(q3km, TensorRole::TokenEmbd, 0) == GgmlType::Q3_K);
  // 32 layers: ffn_down of layers 0 and 1 in Q5_K.
  CHECK(tensor_type(q3km, TensorRole::FfnDown, 1, 32, 11008, 1) == GgmlType::Q5_K);
  CHECK(tensor_type(q3km, TensorRole::FfnDown, 2, 32, 11008, 1) == GgmlType::Q4_K);
}

TEST_CASE("Q2_K follows llama.cpp: attn_v by GQA, attn_output and ffn_down Q3_K", "[engine][weight_mix]") {
  const WeightMix& q2k = mix("q2_k");
  CHECK(q2k.file_type == 10);
  CHECK(tinyllama_type(q2k, TensorRole::AttnV, 3) == GgmlType::Q4_K);  // GQA 8 >= 4
  CHECK(tensor_type(q2k, TensorRole::AttnV, 3, 22, 2048, 4) == GgmlType::Q4_K);
  CHECK(tensor_type(q2k, TensorRole::AttnV, 3, 22, 2048, 2) == GgmlType::Q3_K);
  CHECK(tensor_type(q2k, TensorRole::AttnV, 3, 22, 2048, 1) == GgmlType::Q3_K);
  CHECK(tinyllama_type(q2k, TensorRole::AttnOutput, 3) == GgmlType::Q3_K);
  CHECK(tinyllama_type(q2k, TensorRole::FfnDown, 0) == GgmlType::Q3_K);
  CHECK(tinyllama_type(q2k, TensorRole::FfnDown, 21) == GgmlType::Q3_K);
  CHECK(tinyllama_type(q2k, TensorRole::AttnQ, 3) == GgmlType::Q2_K);
  CHECK(tinyllama_type(q2k, TensorRole::FfnUp, 3) == GgmlType::Q2_K);
  CHECK(tinyllama_type(q2k, TensorRole::TokenEmbd, 0) == GgmlType::Q2_K);
  CHECK(tinyllama_type(q2k, TensorRole::Output, 0) == GgmlType::Q6_K);
}

TEST_CASE("plain q3_k, iq4_nl and iq4_xs give every 2-D tensor their type", "[engine][weight_mix]") {
  CHECK(mix("q3_k").file_type == 11);
  CHECK(mix("iq4_nl").file_type == 25);
  CHECK(mix("iq4_xs").file_type == 30);
  for (TensorRole role : {TensorRole::TokenEmbd, TensorRole::Output, TensorRole::AttnV, TensorRole::FfnDown}) {
    CHECK(tensor_type(mix("q3_k"), role, 0, 22, 2048, 8) == GgmlType::Q3_K);
    CHECK(tensor_type(mix("iq4_nl"), role, 0, 22, 2048, 8) == GgmlType::IQ4_NL);
    CHECK(tensor_type(mix("iq4_xs"), role, 0, 22, 2048, 8) == GgmlType::IQ4_XS);
  }
}

TEST_CASE("rows that do not fill a super-block fall back as llama.cpp does", "[engine][weight_mix]") {
  // 4000 values: 125 blocks of 32 but not a multiple of 256; 100 values fit no quantized block.
  // The low-bit mixes fall back to IQ4_NL where the others take Q5_0 / Q5_1 / Q8_0.
  const struct {
    const char* mix;
    TensorRole role;
    int layer;
    int64_t values;
    GgmlType want;
  } cases[] = {
      {"q4_k_m", TensorRole::AttnQ, 3, 4000, GgmlType::Q5_0},    {"q4_k_m", TensorRole::FfnDown, 0, 4000, GgmlType::Q8_0},
      {"q4_k_m", TensorRole::Output, 0, 4000, GgmlType::Q8_0},   {"q5_k_m", TensorRole::AttnQ, 3, 4000, GgmlType::Q5_1},
      {"q6_k", TensorRole::AttnQ, 3, 4000, GgmlType::Q8_0},      {"q4_k", TensorRole::AttnQ, 3, 4000, GgmlType::Q5_0},
      {"q4_k_m", TensorRole::AttnQ, 3, 100, GgmlType::F16},      {"q4_0", TensorRole::AttnQ, 3, 100, GgmlType::F16},
      {"f32", TensorRole::AttnQ, 3, 100, GgmlType::F32},         {"q2_k", TensorRole::AttnQ, 3, 4000, GgmlType::IQ4_NL},
      {"q3_k_m", TensorRole::AttnQ, 3, 4000, GgmlType::IQ4_NL},  {"iq4_xs", TensorRole::AttnQ, 3, 4000, GgmlType::IQ4_NL},
      {"q3_k_m", TensorRole::AttnV, 0, 4000, GgmlType::Q5_1},    {"q2_k", TensorRole::Output, 0, 4000, GgmlType::Q8_0},
      {"iq4_nl", TensorRole::AttnQ, 3, 100, GgmlType::F16}};
  for (const auto& c : cases) {
    INFO(c.mix << " role " << static_cast<int>(c.role) << " layer " << c.layer << " values " << c.values);
    CHECK(tensor_type(mix(c.mix), c.role, c.layer, kLayers, c.values, 8) == c.want);
  }
}
