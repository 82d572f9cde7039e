// route_tokens: per token a partial sort of its scores for the top k and a softmax over them (or
// over all), then a counting sort of the (token, expert) pairs by expert.
#include "engine/model/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/check.h"

namespace kvdesk {
namespace {

// The score a ranking compares: NaN below every number, so the order stays strict and weak.
float rank_score(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

struct Choice {
  int32_t expert;
  float weight;
};

// exp(s - top), where top is the highest score: a softmax's numerator. An infinite top score:
// the experts that share it split the weight, rather than inf - inf.
float softmax_term(float s, float top) { return std::isfinite(top) ? std::exp(s - top) : s == top ? 1.0f : 0.0f; }

// One token's k experts, highest score first, with their softmax weights over the k scores or,
// not renormalized, over all experts' scores.
void choose_experts(const float* scores, int32_t experts, int32_t k, bool renormalize, std::vector<int32_t>& order,
                    Choice* out) {
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const float sa = rank_score(scores[a]);
    const float sb = rank_score(scores[b]);
    return sa > sb || (sa == sb && a < b);
  });
  const float top = rank_score(scores[order[0]]);
  float sum = 0;
  for (int32_t j = 0; j < k; ++j) {
    const float w = softmax_term(rank_score(scores[order[size_t(j)]]), top);
    out[j] = Choice{order[size_t(j)], w};
    sum += w;
  }
  if (!renormalize) {
    for (int32_t j = k; j < experts; ++j) sum += softmax_term(rank_score(scores[order[size_t(j)]]), top);
  }
  for (int32_t j = 0; j < k; ++j) out[j].weight /= sum;
}

}  // namespace

ExpertRoutes route_tokens(const float* scores, int64_t tokens, int32_t experts, int32_t k, bool renormalize) {
  KVDESK_ASSERT(k >= 1 && k <= experts);
  std::vector<Choice> choices(size_t(tokens) * size_t(k));   // [tokens][k]
  std::vector<int32_t> order(static_cast<size_t>(experts));   // [experts]
  for (int64_t t = 0; t < tokens; ++t) {
    choose_experts(scores + t * experts, experts, k, renormalize, order, choices.data() + t * k);
  }
  ExpertRoutes r;
  r.first_row.assign(size_t(experts) + 1, 0);
  for (const Choice& c : choices) ++r.first_row[size_t(c.expert) + 1];
  std::partial_sum(r.first_row.begin(), r.first_row.end(), r.first_row.begin());
  r.tokens.resize(choices.size());
  r.weights.resize(choices.size());
  std::vector<int32_t> next(r.first_row.begin(), r.first_row.end() - 1);   // [experts] next free row
  for (int64_t t = 0; t < tokens; ++t) {
    for (int32_t j = 0; j < k; ++j) {
      const Choice& c = choices[size_t(t * k + j)];
      const int32_t row = next[size_t(c.expert)]++;
      r.tokens[size_t(row)] = int32_t(t);
      r.weights[size_t(row)] = c.weight;
    }
  }
  return r;
}

}  // namespace kvdesk
