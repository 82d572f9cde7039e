// Expert routing: each token's k highest-scoring experts with softmax weights over their scores
// (or over all experts' scores), grouped by expert; ties, NaN and infinite scores give a valid
// routing.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/model/expert_routing.h"

using kvdesk::ExpertRoutes;
using kvdesk::route_tokens;

namespace {

// Each token's (expert, weight) pairs read back from the routes.
std::vector<std::vector<std::pair<int32_t, float>>> per_token(const ExpertRoutes& r, int64_t tokens, int32_t experts) {
  std::vector<std::vector<std::pair<int32_t, float>>> out(static_cast<size_t>(tokens));
  for (int32_t e = 0; e < experts; ++e) {
    for (int32_t row = r.first_row[size_t(e)]; row < r.first_row[size_t(e) + 1]; ++row) {
      out[size_t(r.tokens[size_t(row)])].push_back({e, r.weights[size_t(row)]});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("route_tokens: the top k experts per token, softmax weights over their scores", "[engine][experts]") {
  // 3 tokens over 5 experts, k = 2.
  const std::vector<float> scores = {0.0f, 3.0f, 1.0f, 2.0f, -1.0f,
                                     5.0f, 0.0f, 0.0f, 0.0f, 4.0f,
                                     1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const ExpertRoutes r = route_tokens(scores.data(), 3, 5, 2);
  // Expert 0 runs tokens 1 and 2, expert 1 tokens 0 and 2, expert 3 token 0, expert 4 token 1.
  CHECK(r.first_row == std::vector<int32_t>{0, 2, 4, 4, 5, 6});
  CHECK(r.tokens == std::vector<int32_t>{1, 2, 0, 2, 0, 1});
  const auto routes = per_token(r, 3, 5);
  // Token 0: experts 1 (3.0) and 3 (2.0), weights e^1 / (e^1 + 1) and 1 / (e^1 + 1).
  REQUIRE(routes[0].size() == 2);
  CHECK(routes[0][0].first == 1);
  CHECK(routes[0][1].first == 3);
  CHECK(routes[0][0].second == Approx(std::exp(1.0) / (std::exp(1.0) + 1.0)));
  CHECK(routes[0][1].second == Approx(1.0 / (std::exp(1.0) + 1.0)));
  // Token 1: experts 0 and 4. Token 2: all tied, the two lowest indices, half each.
  CHECK(routes[1][0].first == 0);
  CHECK(routes[1][1].first == 4);
  CHECK(routes[2][0].first == 0);
  CHECK(routes[2][1].first == 1);
  CHECK(routes[2][0].second == 0.5f);
  CHECK(routes[2][1].second == 0.5f);
}

TEST_CASE("route_tokens without renormalizing: the chosen experts weigh their probability among all", "[engine][experts]") {
  // One token over 4 experts, k = 2 (Qwen2 MoE's routing): the weights are the softmax over all
  // four scores, so they sum to less than 1; a NaN score weighs nothing.
  const std::vector<float> scores = {1.0f, 3.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  const auto routes = per_token(route_tokens(scores.data(), 1, 4, 2, false), 1, 4);
  const double total = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  REQUIRE(routes[0].size() == 2);
  CHECK(routes[0][0].first == 1);
  CHECK(routes[0][1].first == 3);
  CHECK(routes[0][0].second == Approx(std::exp(3.0) / total));
  CHECK(routes[0][1].second == Approx(std::exp(2.0) / total));
  // Renormalized, the same two experts split the whole weight.
  const auto renormalized = per_token(route_tokens(scores.data(), 1, 4, 2, true), 1, 4);
  CHECK(renormalized[0][0].second + renormalized[0][1].second == Approx(1.0f));
}

TEST_CASE("route_tokens keeps its invariants on random scores, NaN and infinities", "[engine][experts]") {
  const int32_t experts = 16;
  const int64_t tokens = 50;
  const int32_t k = GENERATE(1, 4, 16);
  const bool renormalize = GENERATE(true, false);
  std::vector<float> scores(size_t(tokens) * experts);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float(std::sin(double(i) * 12.9898) * 4.0);
  scores[3] = std::numeric_limits<float>::quiet_NaN();
  for (int32_t e = 0; e < experts; ++e) scores[size_t(experts + e)] = -std::numeric_limits<float>::infinity();
  scores[size_t(2 * experts + 5)] = std::numeric_limits<float>::infinity();
  const ExpertRoutes r = route_tokens(scores.data(), tokens, experts, k, renormalize);
  REQUIRE(r.first_row.front() == 0);
  REQUIRE(r.first_row.back() == tokens * k);
  for (int32_t e = 0; e < experts; ++e) {
    for (int32_t row = r.first_row[size_t(e)] + 1; row < r.first_row[size_t(e) + 1]; ++row) {
      CHECK(r.tokens[size_t(row - 1)] < r.tokens[size_t(row)]);   // a token at most once per expert, in order
    }
  }
  const auto routes = per_token(r, tokens, experts);
  for (int64_t t = 0; t < tokens; ++t) {
    INFO("token " << t);
    REQUIRE(routes[size_t(t)].size() == size_t(k));
    float sum = 0;
    for (const auto& [e, w] : routes[size_t(t)]) {
      CHECK(std::isfinite(w));
      CHECK(w >= 0);
      sum += w;
    }
    if (renormalize || k == experts) {
      CHECK(sum == Approx(1.0f));
    } else {
      CHECK(sum <= 1.0f + 1e-6f);
    }
  }
  // The NaN score ranks last: with k < experts token 0 never runs expert 3.
  if (k < experts) {
    for (const auto& [e, w] : routes[0]) CHECK(e != 3);
  }
  // An infinite score takes the whole weight.
  for (const auto& [e, w] : routes[2]) CHECK(w == (e == 5 ? 1.0f : 0.0f));
}
