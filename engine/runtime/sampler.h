// Sampler: picks the next token from one row of logits. Order of the filters (as llama.cpp's
// default chain): logit bias -> repetition, presence and frequency penalties -> the grammar's
// mask -> top-k -> temperature -> softmax -> top-p -> min-p -> draw. Temperature 0 is greedy
// (argmax, lowest id on ties). Log-probabilities, when asked for, are those of the distribution
// after the mask and before temperature: what the model says about the tokens it may write.
// One Sampler per sequence: its random stream, seeded once, makes a run with the same seed
// repeat exactly. Under a grammar the draw without a log-probability report tries unmasked
// draws first (sample()), so a seed's tokens there can differ from the same seed's with a
// report, unless top-k, top-p or min-p narrow the candidates (both then draw from the mask).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

namespace grammar {
class GrammarMatcher;
}

// What sample() reports about its choice when asked.
struct SampleReport {
  float logprob = 0;                  // the chosen token's
  std::vector<TokenLogprob> top;      // [top_logprobs] the most likely tokens, most likely first
};

class Sampler {
 public:
  // Unmasked draws tried against a grammar before its whole mask is computed (sample()).
  static constexpr int32_t kRejectionTries = 8;

  explicit Sampler(const SamplingParams& params);

  // logits[vocab] are not modified; history is the sequence so far (prompt + generated).
  // matcher, when given, removes the tokens its grammar does not allow. report, when given,
  // receives the chosen token's log-probability and the top_logprobs most likely tokens'.
  // Returns -1 when the mask allows no token (every logit -inf after it).
  int32_t sample(const float* logits, int32_t vocab, const std::vector<int32_t>& history,
                 const grammar::GrammarMatcher* matcher = nullptr, SampleReport* report = nullptr,
                 int32_t top_logprobs = 0);

 private:
  struct Candidate {
    int32_t id;
    float value;   // logit, then probability
  };
  void start(const float* logits, int32_t vocab, const std::vector<int32_t>& history);
  bool narrows() const;   // a filter (top-k, top-p, min-p) narrows what a draw may take
  void apply_logit_bias();
  void apply_penalties(const std::vector<int32_t>& history);
  void record_adjusted(const grammar::GrammarMatcher* matcher);
  bool any_allowed() const;   // some candidate is above -inf
  int32_t pick();
  // Up to kRejectionTries unmasked draws (greedy: the best candidates in order) checked against
  // the grammar; the first it allows, or -1.
  int32_t pick_by_rejection(const grammar::GrammarMatcher& matcher);
  std::vector<int32_t> best_candidates(int32_t count) const;
  int32_t pick_among(const std::vector<int32_t>& ids);
  static constexpr int32_t kRetryFromLogits = -2;
  int32_t pick_allowed(const grammar::GrammarMatcher& matcher);
  int32_t pick_from_mask(const grammar::GrammarMatcher& matcher);
  double weigh_with_temperature();
  int32_t draw_refused_tries_masked(double total_weight);
  void keep_allowed(const uint64_t* allowed /*[vocab / 64 rounded up] bits, or null*/);
  double uniform();
  void report_logprobs(int32_t chosen, int32_t top, SampleReport& report) const;
  void keep_top_k();
  void softmax_with_temperature();
  void keep_top_p();
  void keep_min_p();
  int32_t draw();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;   // [vocab] at the start of each sample()
  std::vector<float> adjusted_;         // [vocab] the logits after bias, penalties and mask
  std::vector<double> cumulative_;      // [vocab] running sums of candidates_' weights (weigh_with_temperature)
};

}  // namespace kvdesk
