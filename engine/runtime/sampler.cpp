// Sampler: each filter narrows candidates_ (kept sorted by value once top-k or top-p needs it).
#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "engine/error.h"
#include "engine/grammar/grammar_matcher.h"

namespace kvdesk {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("invalid sampling parameter: " + what);
}

}  // namespace

void validate_sampling_params(const SamplingParams& p) {
  require(std::isfinite(p.temperature) && p.temperature >= 0 && p.temperature <= 100,
          "temperature must be in [0, 100]");
  require(p.top_k >= 0, "top-k must be >= 0");
  require(std::isfinite(p.top_p) && p.top_p > 0 && p.top_p <= 1, "top-p must be in (0, 1]");
  require(std::isfinite(p.min_p) && p.min_p >= 0 && p.min_p < 1, "min-p must be in [0, 1)");
  require(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0 && p.repeat_penalty <= 10,
          "repeat penalty must be in (0, 10]");
  require(p.repeat_last_n >= 0, "repeat-last-n must be >= 0");
  require(std::isfinite(p.presence_penalty) && p.presence_penalty >= -2 && p.presence_penalty <= 2,
          "presence penalty must be in [-2, 2]");
  require(std::isfinite(p.frequency_penalty) && p.frequency_penalty >= -2 && p.frequency_penalty <= 2,
          "frequency penalty must be in [-2, 2]");
  for (const auto& [id, bias] : p.logit_bias) {
    require(id >= 0, "logit bias token ids must be >= 0");
    require(std::isfinite(bias) && bias >= -100 && bias <= 100, "logit biases must be in [-100, 100]");
  }
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  validate_sampling_params(params);
}

int32_t Sampler::sample(const float* logits, int32_t vocab, const std::vector<int32_t>& history,
                        const grammar::GrammarMatcher* matcher, SampleReport* report, int32_t top_logprobs) {
  start(logits, vocab, history);
  if (matcher && !report) {
    if (const int32_t chosen = pick_allowed(*matcher); chosen != kRetryFromLogits) return chosen;
    start(logits, vocab, history);
    return pick_from_mask(*matcher);
  }
  if (report) record_adjusted(matcher);
  // Under a grammar as pick_allowed() where a filter narrows: the same seed, the same token.
  const int32_t chosen = matcher ? pick_from_mask(*matcher) : pick();
  if (report && chosen >= 0) report_logprobs(chosen, top_logprobs, *report);
  return chosen;
}

// Under a grammar, with candidates_ as start() left them. Where this state's mask is known (a
// bitset look-up) the draw is over the allowed tokens alone, so the softmax skips the rest.
// Otherwise rejection first: draws without the mask until one is a token the grammar allows.
// Each stage is exactly a draw from the masked distribution: a draw from p accepted when
// allowed gives t with probability p(t) / A (A the allowed mass), whichever try it was, and so
// does the masked draw after kRejectionTries refusals. Greedy tries the best candidates in
// order: the first allowed one is the masked argmax. Only when every try is refused is the
// whole mask computed (its first visit of a grammar state walks the vocabulary's trie). Filters
// that narrow the candidates would differ with and without the mask, so they take the mask
// first. kRetryFromLogits when the refused tries' probabilities are too small to carry the
// allowed mass.
int32_t Sampler::pick_allowed(const grammar::GrammarMatcher& matcher) {
  if (matcher.must_end()) return matcher.can_end() ? pick_among(matcher.end_of_generation_ids()) : -1;
  if (narrows() || matcher.mask_known()) return pick_from_mask(matcher);
  if (!any_allowed()) return -1;
  if (const int32_t allowed = pick_by_rejection(matcher); allowed >= 0) return allowed;
  if (params_.temperature <= 0) return pick_from_mask(matcher);
  const double total_weight = cumulative_.back();
  keep_allowed(matcher.allowed_bits());
  return draw_refused_tries_masked(total_weight);
}

// The draw (pick()) over the tokens the grammar allows; -1 when none is above -inf.
int32_t Sampler::pick_from_mask(const grammar::GrammarMatcher& matcher) {
  keep_allowed(matcher.allowed_bits());
  return any_allowed() ? pick() : -1;
}

// candidates_ = the logits with the bias and penalties in.
void Sampler::start(const float* logits, int32_t vocab, const std::vector<int32_t>& history) {
  candidates_.resize(size_t(vocab));
  for (int32_t i = 0; i < vocab; ++i) candidates_[size_t(i)] = Candidate{i, logits[i]};
  apply_logit_bias();
  apply_penalties(history);
}

bool Sampler::narrows() const {
  return params_.temperature > 0 && (params_.top_k > 0 || params_.top_p < 1.0f || params_.min_p > 0);
}

int32_t Sampler::pick_by_rejection(const grammar::GrammarMatcher& matcher) {
  if (params_.temperature <= 0) {
    for (int32_t token : best_candidates(kRejectionTries)) {
      if (matcher.allows(token)) return token;
    }
    return -1;
  }
  const double total = weigh_with_temperature();
  for (int32_t attempt = 0; attempt < kRejectionTries; ++attempt) {
    const double u = uniform() * total;   // as draw(): the first candidate whose running sum passes u
    const size_t i = size_t(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin());
    const int32_t token = candidates_[std::min(i, candidates_.size() - 1)].id;
    if (matcher.allows(token)) return token;
  }
  return -1;
}

// softmax_with_temperature() without the division: candidates_ get exp((v - max) / T) (the
// most likely 1), cumulative_ their running sums; returns the sum. One pass for the rejection
// tries, which draw against the sum and need no normalized probabilities.
double Sampler::weigh_with_temperature() {
  float max_value = candidates_[0].value;
  for (const Candidate& c : candidates_) max_value = std::max(max_value, c.value);
  cumulative_.resize(candidates_.size());
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    candidates_[i].value = std::exp((candidates_[i].value - max_value) / params_.temperature);
    cumulative_[i] = total += candidates_[i].value;
  }
  return total;
}

// After refused tries at a temperature: candidates_ hold the allowed tokens' weights from
// weigh_with_temperature(); the masked distribution is those renormalized, drawn here without
// a second exponential unless the allowed share of the whole is too small for them to carry it.
int32_t Sampler::draw_refused_tries_masked(double total_weight) {
  constexpr double kSmallestAllowedShare = 1e-20;
  double allowed_weight = 0;
  for (const Candidate& c : candidates_) allowed_weight += c.value;
  return allowed_weight < kSmallestAllowedShare * total_weight ? kRetryFromLogits : draw();
}

// Keeps the candidates whose bit is set (candidates_ in id order, as start() leaves them); a
// null mask keeps all.
void Sampler::keep_allowed(const uint64_t* allowed) {
  if (!allowed) return;
  size_t kept = 0;
  for (const Candidate& c : candidates_) {
    if ((allowed[size_t(c.id) >> 6] >> (c.id & 63)) & 1) candidates_[kept++] = c;
  }
  candidates_.resize(kept);
}

// When the grammar allows only end-of-generation: the masked distribution over those few ids,
// drawn without touching the rest of the vocabulary (greedy: the best, ties by lower id).
int32_t Sampler::pick_among(const std::vector<int32_t>& ids) {
  std::vector<Candidate> among;
  for (int32_t id : ids) {
    if (id >= 0 && id < int32_t(candidates_.size())) among.push_back(candidates_[size_t(id)]);
  }
  std::sort(among.begin(), among.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  candidates_ = std::move(among);
  if (!any_allowed()) return -1;
  return pick();
}

// The `count` highest finite values of candidates_, highest first, ties by lower id (pick()'s
// order), in one pass.
std::vector<int32_t> Sampler::best_candidates(int32_t count) const {
  std::vector<Candidate> best;   // sorted, at most count
  auto before = [](const Candidate& a, const Candidate& b) { return a.value > b.value || (a.value == b.value && a.id < b.id); };
  for (const Candidate& c : candidates_) {
    if (!(c.value > -std::numeric_limits<float>::infinity())) continue;
    if (int32_t(best.size()) == count && !before(c, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, before), c);
    if (int32_t(best.size()) > count) best.pop_back();
  }
  std::vector<int32_t> ids;
  for (const Candidate& c : best) ids.push_back(c.id);
  return ids;
}

bool Sampler::any_allowed() const {
  return std::any_of(candidates_.begin(), candidates_.end(), [](const Candidate& c) {
    return c.value > -std::numeric_limits<float>::infinity();
  });
}

// The draw over candidates_ once bias, penalties and mask are in: greedy (ties and an all -inf
// row pick the lowest id, as the GPU's argmax does), or the filters.
int32_t Sampler::pick() {
  if (params_.temperature <= 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < int32_t(candidates_.size()); ++i) {
      if (candidates_[i].value > candidates_[best].value) best = i;
    }
    return candidates_[size_t(best)].id;
  }
  keep_top_k();
  softmax_with_temperature();
  keep_top_p();
  keep_min_p();
  return draw();
}

// adjusted_ = the logits with bias and penalties in, and the grammar's -inf where it refuses:
// what the report's log-probabilities are computed from.
void Sampler::record_adjusted(const grammar::GrammarMatcher* matcher) {
  adjusted_.resize(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) adjusted_[i] = candidates_[i].value;
  if (matcher) matcher->apply_mask(adjusted_.data());
}

// log softmax of adjusted_ (bias, penalties and mask in; temperature not): the chosen token's
// value and the `top` highest, ties by lower id.
void Sampler::report_logprobs(int32_t chosen, int32_t top, SampleReport& report) const {
  float max_value = -std::numeric_limits<float>::infinity();
  for (float v : adjusted_) max_value = std::max(max_value, v);
  double sum = 0;
  for (float v : adjusted_) sum += std::isinf(v) ? 0.0 : std::exp(double(v) - max_value);
  const float log_sum = float(max_value + std::log(sum));
  report.logprob = adjusted_[size_t(chosen)] - log_sum;
  report.top.clear();
  if (top <= 0) return;
  std::vector<int32_t> ids(adjusted_.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  const size_t n = std::min(ids.size(), size_t(top));
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
    return adjusted_[size_t(a)] > adjusted_[size_t(b)] || (adjusted_[size_t(a)] == adjusted_[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < n && !std::isinf(adjusted_[size_t(ids[i])]); ++i) {
    report.top.push_back(TokenLogprob{ids[i], adjusted_[size_t(ids[i])] - log_sum});
  }
}

void Sampler::apply_logit_bias() {
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id < int32_t(candidates_.size())) candidates_[size_t(id)].value += bias;
  }
}

// Over the distinct tokens of the last repeat_last_n: llama.cpp's repetition rule (a positive
// logit divided by the penalty, a negative one multiplied), then OpenAI's additive presence
// and frequency penalties.
void Sampler::apply_penalties(const std::vector<int32_t>& history) {
  const bool repeat = params_.repeat_penalty != 1.0f;
  const bool additive = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if ((!repeat && !additive) || params_.repeat_last_n == 0) return;
  const size_t n = std::min(history.size(), size_t(params_.repeat_last_n));
  std::unordered_map<int32_t, int32_t> counts;
  for (auto it = history.end() - ptrdiff_t(n); it != history.end(); ++it) ++counts[*it];
  for (const auto& [id, count] : counts) {
    if (id < 0 || id >= int32_t(candidates_.size())) continue;
    float& v = candidates_[size_t(id)].value;
    if (repeat) v = v > 0 ? v / params_.repeat_penalty : v * params_.repeat_penalty;
    v -= float(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

void Sampler::keep_top_k() {
  if (params_.top_k <= 0 || params_.top_k >= int32_t(candidates_.size())) return;
  auto by_value = [](const Candidate& a, const Candidate& b) {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
  };
  std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(), by_value);
  candidates_.resize(size_t(params_.top_k));
}

void Sampler::softmax_with_temperature() {
  float max_value = candidates_[0].value;
  for (const Candidate& c : candidates_) max_value = std::max(max_value, c.value);
  double sum = 0;
  for (Candidate& c : candidates_) {
    c.value = std::exp((c.value - max_value) / params_.temperature);
    sum += c.value;
  }
  for (Candidate& c : candidates_) c.value = float(c.value / sum);
}

// Smallest set of most likely tokens whose probabilities add up to at least top_p.
void Sampler::keep_top_p() {
  if (params_.top_p >= 1.0f) return;
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
  });
  double cumulative = 0;
  size_t keep = candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].value;
    if (cumulative >= params_.top_p) {
      keep = i + 1;
      break;
    }
  }
  candidates_.resize(keep);
}

// Drops tokens less likely than min_p times the most likely one.
void Sampler::keep_min_p() {
  if (params_.min_p <= 0) return;
  float max_p = 0;
  for (const Candidate& c : candidates_) max_p = std::max(max_p, c.value);
  const float threshold = params_.min_p * max_p;
  std::erase_if(candidates_, [&](const Candidate& c) { return c.value < threshold; });
}

// A 53-bit uniform in [0, 1) from the raw 64-bit stream: the same on every standard library.
double Sampler::uniform() { return double(rng_() >> 11) * (1.0 / 9007199254740992.0); }

int32_t Sampler::draw() {
  double total = 0;
  for (const Candidate& c : candidates_) total += c.value;
  const double u = uniform() * total;
  double cumulative = 0;
  for (const Candidate& c : candidates_) {
    cumulative += c.value;
    if (u < cumulative) return c.id;
  }
  return candidates_.back().id;
}

}  // namespace kvdesk
