// ops::rms_norm against the formula in double: rows of every length modulo its 8 partial sums,
// written in place or apart, and a row of zeros (eps keeps the scale finite).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

using namespace kvdesk;

TEST_CASE("rms_norm equals x / sqrt(mean(x^2) + eps) * w for every row length", "[kernels][rms_norm]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (const int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(13), int64_t(2051)}) {
    std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (float& v : x) v = 10 * normal(rng);
    for (float& v : w) v = normal(rng);
    double sum_sq = 0;
    for (const float v : x) sum_sq += double(v) * v;
    const double scale = 1.0 / std::sqrt(sum_sq / double(n) + 1e-5);
    ops::rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) {
      CHECK(y[size_t(i)] == Approx(double(x[size_t(i)]) * scale * w[size_t(i)]).epsilon(1e-6).margin(1e-30));
    }
    std::vector<float> in_place = x;
    ops::rms_norm(in_place.data(), w.data(), in_place.data(), n, 1e-5f);
    REQUIRE(in_place == y);
  }
}

TEST_CASE("rms_norm of a zero row is zero", "[kernels][rms_norm]") {
  const std::vector<float> x(19, 0.0f), w(19, 2.0f);
  std::vector<float> y(19, 1.0f);
  ops::rms_norm(x.data(), w.data(), y.data(), 19, 1e-6f);
  for (const float v : y) REQUIRE(v == 0.0f);
}
