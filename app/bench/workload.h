// Synthetic chat workloads from a seed, the same on every machine and standard library (numbers
// straight from mt19937_64, distributions written here, not <random>'s). Lengths are log-normal,
// clipped: many short turns and a long tail, as in ShareGPT. Texts are words of a small fixed
// list of simple English (TinyStories-like), so any tokenizer can encode them.
#pragma once
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "app/replay/trace.h"

namespace kvdesk::bench {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  double uniform();  // [0, 1)
  double normal();   // N(0, 1), Box-Muller
  double exponential(double mean);
  int32_t below(int32_t n);  // [0, n)

 private:
  std::mt19937_64 engine_;
};

// exp(N(ln median, sigma)), rounded and clipped to [min, max].
struct LengthDist {
  double median = 256;
  double sigma = 0.8;
  int32_t min = 8;
  int32_t max = 2048;
};

int32_t draw_length(const LengthDist& dist, Rng& rng);
std::vector<int32_t> draw_lengths(const LengthDist& dist, size_t count, uint64_t seed);
// "log-normal, median 256, sigma 0.8, clipped to [8, 2048]"
std::string describe(const LengthDist& dist);

// Token ids in [3, vocab): above the unknown/BOS/EOS ids of SentencePiece vocabularies, so a
// synthetic prompt never ends generation by itself.
std::vector<int32_t> random_tokens(int32_t count, int32_t vocab, Rng& rng);
std::string random_words(int32_t words, Rng& rng);

// Conversations arrive as a Poisson process; each starts with one of a few shared system
// prompts and has `turns` user turns, each sent an exponential think time after the previous
// answer ended.
struct ChatWorkload {
  int32_t conversations = 6;
  int32_t turns = 2;
  int32_t system_prompts = 2;  // distinct shared system prompts
  int32_t system_words = 48;
  LengthDist user_words{16, 0.6, 4, 96};
  LengthDist answer_tokens{24, 0.5, 4, 96};
  double arrivals_per_s = 4;
  double think_ms = 100;
  uint64_t seed = 1;
};

std::vector<TraceConversation> synthetic_trace(const ChatWorkload& workload);
// The replay format of app/replay/trace.h, one JSON line per turn (kvdesk-cli replay reads it).
void write_trace(const std::vector<TraceConversation>& trace, std::ostream& out);

}  // namespace kvdesk::bench
