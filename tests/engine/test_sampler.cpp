// Sampler: greedy, each filter's effect on a crafted distribution, seeds repeat, a grammar's mask.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "engine/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/runtime/sampler.h"

using namespace kvdesk;

namespace {

std::map<int32_t, int> histogram(const SamplingParams& params, const std::vector<float>& logits,
                                 const std::vector<int32_t>& history = {}, int draws = 2000) {
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.sample(logits.data(), int32_t(logits.size()), history)];
  return counts;
}

}  // namespace

TEST_CASE("temperature 0 picks the largest logit, the lowest id on a tie", "[engine][sampler]") {
  Sampler sampler(SamplingParams{});
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  CHECK(sampler.sample(logits.data(), 4, {}) == 1);
}

TEST_CASE("top-k 2 never draws outside the two largest logits", "[engine][sampler]") {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  const auto counts = histogram(p, {1.0f, 2.0f, 0.5f, 1.9f});
  CHECK(counts.count(0) == 0);
  CHECK(counts.count(2) == 0);
  CHECK(counts.at(1) > 0);
  CHECK(counts.at(3) > 0);
}

TEST_CASE("top-p keeps the smallest set that reaches p", "[engine][sampler]") {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  // Probabilities ~ 0.64, 0.24, 0.09, 0.03: the first token alone reaches 0.5.
  const auto counts = histogram(p, {3.0f, 2.0f, 1.0f, 0.0f});
  CHECK(counts.size() == 1);
  CHECK(counts.count(0) == 1);
}

TEST_CASE("min-p drops tokens below a fraction of the best", "[engine][sampler]") {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;
  // e^0 : e^-1 : e^-3 -> relative 1, 0.37, 0.05: the last is dropped.
  const auto counts = histogram(p, {0.0f, -1.0f, -3.0f});
  CHECK(counts.count(2) == 0);
  CHECK(counts.count(1) == 1);
}

TEST_CASE("repetition penalty turns greedy away from a repeated token", "[engine][sampler]") {
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  Sampler sampler(p);
  const std::vector<float> logits = {1.0f, 1.5f, 0.2f};
  CHECK(sampler.sample(logits.data(), 3, {1}) == 0);   // 1.5 / 2 = 0.75 < 1.0
  CHECK(sampler.sample(logits.data(), 3, {}) == 1);
}

TEST_CASE("the same seed draws the same tokens, another seed other tokens", "[engine][sampler]") {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.3f;
  auto draw = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler sampler(p);
    std::vector<int32_t> ids;
    for (int i = 0; i < 32; ++i) ids.push_back(sampler.sample(logits.data(), 64, {}));
    return ids;
  };
  CHECK(draw(42) == draw(42));
  CHECK(draw(42) != draw(43));
}

TEST_CASE("out-of-range sampling parameters are refused with a reason", "[engine][sampler]") {
  SamplingParams p;
  p.temperature = -1;
  CHECK_THROWS_AS(Sampler(p), Error);
  p = SamplingParams{};
  p.top_p = 0;
  CHECK_THROWS_WITH(validate_sampling_params(p), Catch::Contains("top-p"));
  p = SamplingParams{};
  p.min_p = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(validate_sampling_params(p), Catch::Contains("min-p"));
}

TEST_CASE("presence penalty subtracts once per seen token, frequency once per occurrence", "[engine][sampler]") {
  const std::vector<float> logits = {1.0f, 1.5f, 0.2f};
  SamplingParams presence;
  presence.presence_penalty = 0.6f;
  Sampler by_presence(presence);
  CHECK(by_presence.sample(logits.data(), 3, {1}) == 0);         // 1.5 - 0.6 = 0.9 < 1.0
  CHECK(by_presence.sample(logits.data(), 3, {1, 1, 1}) == 0);   // still 0.9: presence counts once
  CHECK(by_presence.sample(logits.data(), 3, {}) == 1);

  SamplingParams frequency;
  frequency.frequency_penalty = 0.2f;
  Sampler by_frequency(frequency);
  CHECK(by_frequency.sample(logits.data(), 3, {1}) == 1);         // 1.5 - 0.2 = 1.3
  CHECK(by_frequency.sample(logits.data(), 3, {1, 1, 1}) == 0);   // 1.5 - 0.6 = 0.9
}

TEST_CASE("a negative presence penalty favours seen tokens, only within repeat-last-n", "[engine][sampler]") {
  const std::vector<float> logits = {1.0f, 1.5f, 0.2f};
  SamplingParams p;
  p.presence_penalty = -2.0f;
  p.repeat_last_n = 1;
  Sampler sampler(p);
  CHECK(sampler.sample(logits.data(), 3, {2}) == 2);      // 0.2 + 2 = 2.2
  CHECK(sampler.sample(logits.data(), 3, {2, 0}) == 0);   // only the last token counts: 1.0 + 2
}

TEST_CASE("presence and frequency penalties outside [-2, 2] are refused", "[engine][sampler]") {
  SamplingParams p;
  p.presence_penalty = 2.5f;
  CHECK_THROWS_WITH(validate_sampling_params(p), Catch::Contains("presence penalty"));
  p = SamplingParams{};
  p.frequency_penalty = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(validate_sampling_params(p), Catch::Contains("frequency penalty"));
}

TEST_CASE("logit bias moves greedy and sampled picks, -100 bans a token", "[engine][sampler]") {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 2.0f};
  SamplingParams p;
  p.logit_bias = {{2, 5.0f}};
  CHECK(Sampler(p).sample(logits.data(), 4, {}) == 2);
  p.logit_bias = {{1, -100.0f}, {99, 100.0f}};  // an id past the vocabulary changes nothing
  CHECK(Sampler(p).sample(logits.data(), 4, {}) == 3);
  p.temperature = 1.0f;
  const std::map<int32_t, int> counts = histogram(p, logits);
  CHECK(counts.count(1) == 0);
  CHECK(counts.at(3) > counts.at(0));
}

TEST_CASE("logit biases outside [-100, 100] or for negative ids are refused", "[engine][sampler]") {
  SamplingParams p;
  p.logit_bias = {{0, 100.5f}};
  CHECK_THROWS_WITH(validate_sampling_params(p), Catch::Contains("logit biases"));
  p.logit_bias = {{-1, 1.0f}};
  CHECK_THROWS_WITH(validate_sampling_params(p), Catch::Contains("token ids"));
}

namespace {

// Tokens "a" "b" "c" "d" and an end of generation; the grammar allows runs of b and c.
struct BcGrammar {
  std::shared_ptr<const grammar::TokenTable> table =
      std::make_shared<const grammar::TokenTable>(std::vector<std::string>{"a", "b", "c", "d", ""}, std::vector<int32_t>{4});
  grammar::GrammarMatcher matcher{grammar::parse_gbnf("root ::= [bc]+"), table};
};

constexpr int kGrammarDraws = 20000;

// kGrammarDraws draws at temperature 1 under the matcher, counted by token.
std::map<int32_t, int> grammar_histogram(uint64_t seed, const std::vector<float>& logits,
                                         const grammar::GrammarMatcher& matcher) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  Sampler sampler(p);
  std::map<int32_t, int> counts;
  for (int i = 0; i < kGrammarDraws; ++i) ++counts[sampler.sample(logits.data(), int32_t(logits.size()), {}, &matcher)];
  return counts;
}

}  // namespace

TEST_CASE("under a grammar, greedy is the best allowed token, ties to the lowest id", "[engine][sampler][grammar]") {
  BcGrammar g;
  Sampler sampler(SamplingParams{});
  const std::vector<float> a_best = {5.0f, 1.0f, 2.0f, 4.0f, 3.0f};
  CHECK(sampler.sample(a_best.data(), 5, {}, &g.matcher) == 2);
  const std::vector<float> b_best = {0.0f, 3.0f, 3.0f, 0.0f, 1.0f};   // b allowed and first of the tie
  CHECK(sampler.sample(b_best.data(), 5, {}, &g.matcher) == 1);
  const std::vector<float> tie_with_refused = {3.0f, 1.0f, 3.0f, 0.0f, 0.0f};   // a ties c but is refused
  CHECK(sampler.sample(tie_with_refused.data(), 5, {}, &g.matcher) == 2);
}

TEST_CASE("under a grammar, sampling draws from the allowed tokens renormalized", "[engine][sampler][grammar]") {
  BcGrammar g;
  // Softmax over b and c alone: b 1/(1+e), c e/(1+e); a and d carry most of the unmasked mass.
  std::map<int32_t, int> counts = grammar_histogram(3, {3.0f, 0.0f, 1.0f, 2.5f, -20.0f}, g.matcher);
  CHECK(counts[0] == 0);
  CHECK(counts[3] == 0);
  CHECK(counts[4] == 0);   // the grammar cannot end before its first b or c
  const double expected_c = std::exp(1.0) / (1.0 + std::exp(1.0));
  CHECK(double(counts[2]) / kGrammarDraws == Approx(expected_c).margin(0.015));
}

TEST_CASE("under a grammar, an allowed share too small for the unmasked probabilities is drawn from the logits",
          "[engine][sampler][grammar]") {
  BcGrammar g;
  // b and c carry e^-60 of the mass: every unmasked try lands on a or d.
  std::map<int32_t, int> counts = grammar_histogram(5, {0.0f, -60.0f, -59.0f, 0.0f, -80.0f}, g.matcher);
  CHECK(counts[1] + counts[2] == kGrammarDraws);
  CHECK(double(counts[2]) / kGrammarDraws == Approx(std::exp(1.0) / (1.0 + std::exp(1.0))).margin(0.015));
}

TEST_CASE("under a grammar with top-k, a seed draws the same tokens with and without log-probabilities",
          "[engine][sampler][grammar]") {
  BcGrammar g;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.seed = 9;
  const std::vector<float> logits = {2.0f, 0.5f, 1.0f, 1.5f, 0.0f};
  Sampler plain(p), reporting(p);
  for (int i = 0; i < 500; ++i) {
    SampleReport report;
    const int32_t token = plain.sample(logits.data(), 5, {}, &g.matcher);
    REQUIRE(reporting.sample(logits.data(), 5, {}, &g.matcher, &report, 2) == token);
    CHECK(report.logprob == Approx(token == 2 ? std::log(std::exp(1.0) / (std::exp(1.0) + std::exp(0.5))) : std::log(std::exp(0.5) / (std::exp(1.0) + std::exp(0.5)))));
  }
}

TEST_CASE("greedy over an all -inf row picks id 0, and a grammar that allows no token gives -1", "[engine][sampler][grammar]") {
  const float inf = std::numeric_limits<float>::infinity();
  Sampler sampler(SamplingParams{});
  const std::vector<float> none_finite = {-inf, -inf, -inf, -inf, -inf};
  CHECK(sampler.sample(none_finite.data(), 5, {}) == 0);
  BcGrammar g;
  const std::vector<float> only_refused = {1.0f, -inf, -inf, 2.0f, 0.0f};   // b and c banned by the row
  CHECK(sampler.sample(only_refused.data(), 5, {}, &g.matcher) == -1);
}

TEST_CASE("under a grammar, greedy finds the best allowed token past the rejection tries", "[engine][sampler][grammar]") {
  std::vector<std::string> pieces;
  for (char c = 'a'; c <= 't'; ++c) pieces.push_back(std::string(1, c));
  pieces.push_back("");   // end of generation
  const auto table = std::make_shared<const grammar::TokenTable>(pieces, std::vector<int32_t>{20});
  grammar::GrammarMatcher matcher{grammar::parse_gbnf("root ::= [qs]+"), table};
  std::vector<float> logits(21);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(logits.size() - i);   // a is best, then b, ...
  Sampler sampler(SamplingParams{});
  CHECK(sampler.sample(logits.data(), 21, {}, &matcher) == 16);   // 'q', the 17th best, beyond kRejectionTries
  logits[18] = 100.0f;                                             // 's' best of all
  CHECK(sampler.sample(logits.data(), 21, {}, &matcher) == 18);
}

TEST_CASE("where the grammar must end, only end-of-generation ids are drawn, in their own proportions",
          "[engine][sampler][grammar]") {
  // Two end-of-generation ids (4 and 5); the grammar "b" is complete after one b.
  const auto table = std::make_shared<const grammar::TokenTable>(std::vector<std::string>{"a", "b", "c", "d", "", ""},
                                                                 std::vector<int32_t>{4, 5});
  grammar::GrammarMatcher matcher{grammar::parse_gbnf("root ::= \"b\""), table};
  matcher.accept(1);
  REQUIRE(matcher.must_end());
  const std::vector<float> logits = {9.0f, 9.0f, 9.0f, 9.0f, 0.0f, 1.0f};
  CHECK(Sampler(SamplingParams{}).sample(logits.data(), 6, {}, &matcher) == 5);
  std::map<int32_t, int> counts = grammar_histogram(11, logits, matcher);
  CHECK(counts[4] + counts[5] == kGrammarDraws);
  CHECK(double(counts[5]) / kGrammarDraws == Approx(std::exp(1.0) / (1.0 + std::exp(1.0))).margin(0.015));
}
