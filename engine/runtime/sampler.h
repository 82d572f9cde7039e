// Sampler: picks the next token from one row of logits. Order of the filters (as llama.cpp's
// default chain): logit bias -> repetition, presence and frequency penalties -> top-k ->
// temperature -> softmax -> top-p -> min-p -> draw. Temperature 0 is greedy (argmax, lowest id on
// ties). One Sampler per sequence: its random stream, seeded once, makes a run with the same seed
// repeat exactly.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // logits[vocab] are not modified; history is the sequence so far (prompt + generated).
  int32_t sample(const float* logits, int32_t vocab, const std::vector<int32_t>& history);

 private:
  struct Candidate {
    int32_t id;
    float value;   // logit, then probability
  };
  void apply_logit_bias();
  void apply_penalties(const std::vector<int32_t>& history);
  void keep_top_k();
  void softmax_with_temperature();
  void keep_top_p();
  void keep_min_p();
  int32_t draw();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;   // [vocab] at the start of each sample()
};

}  // namespace kvdesk
