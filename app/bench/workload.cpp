// Seeded length distributions, token and word streams, and synthetic chat traces.
#include "app/bench/workload.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "app/bench/bench_stats.h"

namespace kvdesk::bench {
namespace {

constexpr const char* kWords[] = {
    "once",   "upon", "a",      "time",   "there",    "was",     "little", "girl",  "boy",    "named", "Mia",
    "Ben",    "Lily", "Tom",    "who",    "liked",    "to",      "play",   "in",    "the",    "park",  "with",
    "her",    "his",  "friend", "dog",    "cat",      "big",     "small",  "red",   "blue",   "green", "happy",
    "sad",    "sun",  "tree",   "house",  "ball",     "box",     "toy",    "cake",  "went",   "saw",   "found",
    "wanted", "said", "ran",    "jumped", "smiled",   "and",     "but",    "then",  "one",    "day",   "they",
    "she",    "he",   "it",     "is",     "very",     "good",    "bright", "shiny", "garden", "river", "bird",
    "flower", "mom",  "dad",    "home",   "together", "learned", "shared",
};
constexpr int32_t kNumWords = int32_t(sizeof(kWords) / sizeof(kWords[0]));

}  // namespace

double Rng::uniform() { return double(engine_() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: the log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::exponential(double mean) { return -mean * std::log(1.0 - uniform()); }

int32_t Rng::below(int32_t n) { return int32_t(uniform() * double(n)); }

int32_t draw_length(const LengthDist& dist, Rng& rng) {
  const double x = std::exp(std::log(dist.median) + dist.sigma * rng.normal());
  return int32_t(std::clamp<long long>(std::llround(x), dist.min, dist.max));
}

std::vector<int32_t> draw_lengths(const LengthDist& dist, size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> lengths(count);
  for (int32_t& n : lengths) n = draw_length(dist, rng);
  return lengths;
}

std::string describe(const LengthDist& dist) {
  return "log-normal, median " + format_number(dist.median, 0) + ", sigma " + format_number(dist.sigma, 2) +
         ", clipped to [" + std::to_string(dist.min) + ", " + std::to_string(dist.max) + "]";
}

std::vector<int32_t> random_tokens(int32_t count, int32_t vocab, Rng& rng) {
  std::vector<int32_t> tokens(size_t(std::max(count, 0)));
  for (int32_t& t : tokens) t = 3 + rng.below(std::max(vocab - 3, 1));
  return tokens;
}

std::string random_words(int32_t words, Rng& rng) {
  std::string text;
  for (int32_t i = 0; i < words; ++i) {
    if (i > 0) text += ' ';
    text += kWords[rng.below(kNumWords)];
  }
  return text;
}

std::vector<TraceConversation> synthetic_trace(const ChatWorkload& w) {
  Rng rng(w.seed);
  std::vector<std::string> systems;
  for (int32_t i = 0; i < std::max(w.system_prompts, 1); ++i) systems.push_back(random_words(w.system_words, rng));
  std::vector<TraceConversation> trace;
  double arrival_ms = 0;
  for (int32_t c = 0; c < w.conversations; ++c) {
    TraceConversation conversation{std::string("c").append(std::to_string(c + 1)), {}};
    for (int32_t t = 0; t < std::max(w.turns, 1); ++t) {
      TraceTurn turn;
      turn.system = t == 0 ? systems[size_t(c) % systems.size()] : "";
      turn.user = random_words(draw_length(w.user_words, rng), rng);
      turn.max_tokens = draw_length(w.answer_tokens, rng);
      turn.start_ms = t == 0 ? arrival_ms : rng.exponential(w.think_ms);
      conversation.turns.push_back(std::move(turn));
    }
    trace.push_back(std::move(conversation));
    arrival_ms += w.arrivals_per_s > 0 ? rng.exponential(1000.0 / w.arrivals_per_s) : 0;
  }
  return trace;
}

void write_trace(const std::vector<TraceConversation>& trace, std::ostream& out) {
  for (const TraceConversation& c : trace) {
    for (size_t t = 0; t < c.turns.size(); ++t) {
      const TraceTurn& turn = c.turns[t];
      nlohmann::json j = {{"conversation", c.name},
                          {"user", turn.user},
                          {"max_tokens", turn.max_tokens},
                          {"temperature", turn.temperature}};
      if (!turn.system.empty()) j["system"] = turn.system;
      j[t == 0 ? "arrival_ms" : "after_ms"] = turn.start_ms;
      out << j.dump() << '\n';
    }
  }
}

}  // namespace kvdesk::bench
