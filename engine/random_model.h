// Random-weight Llama GGUFs of real shapes (e.g. TinyLlama-1.1B: 22 layers, 2048, 32 heads,
// 4 KV heads, 5632) with a real SentencePiece vocabulary, so tests and benchmarks measure
// realistic sizes without downloading a model. Weights ~ N(0, 0.02), norms 1.
#pragma once
#include <cstdint>
#include <string>

#include "engine/weight_mix.h"

namespace kvdesk {

struct RandomModelSpec {
  int32_t layers = 2;
  int32_t embd = 256;
  int32_t heads = 4;
  int32_t kv_heads = 4;
  int32_t ff = 704;
  int32_t context_length = 2048;
  float rope_freq_base = 10000.0f;
  std::string vocab_from;            // a SentencePiece .model file
  WeightMix mix = *find_weight_mix("f16");  // types of the 2-D weights (engine/weight_mix.h)
  uint64_t seed = 1;
  std::string name = "kvdesk-random";
};

// Throws kvdesk::Error on bad shapes, an unreadable vocabulary or I/O failure.
void write_random_model(const RandomModelSpec& spec, const std::string& out_path);

}  // namespace kvdesk
