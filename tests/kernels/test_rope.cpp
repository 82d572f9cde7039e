// RoPE: hand-worked rotations show which dimensions each mode pairs up; rope_angles with Llama 3
// frequency factors and linear scaling equals the direct formula
// theta_i = pos * freq_scale * base^(-2i/n_rot) / factor_i; and the attention score of two
// rotated vectors depends only on their distance, in both modes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

using namespace kvdesk;
using ops::RopeMode;
using ops::RopeParams;

namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<float> rotated(std::vector<float> x, int32_t position, const RopeParams& p) {
  std::vector<float> cos_sin(static_cast<size_t>(p.n_rot));
  ops::rope_angles(position, p, cos_sin.data());
  ops::rope_rotate(x.data(), cos_sin.data(), p.n_rot, p.mode);
  return x;
}

// The rotation written out directly, in double: pair i of the mode turned by theta_i.
std::vector<double> direct_rope(const std::vector<float>& x, int32_t position, const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  const int half = p.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const double factor = p.freq_factors ? p.freq_factors[i] : 1.0;
    const double theta = position * double(p.freq_scale) * std::pow(double(p.freq_base), -2.0 * i / p.n_rot) / factor;
    const int ia = p.mode == RopeMode::Normal ? 2 * i : i;
    const int ib = p.mode == RopeMode::Normal ? 2 * i + 1 : i + half;
    y[size_t(ia)] = x[size_t(ia)] * std::cos(theta) - x[size_t(ib)] * std::sin(theta);
    y[size_t(ib)] = x[size_t(ia)] * std::sin(theta) + x[size_t(ib)] * std::cos(theta);
  }
  return y;
}

std::vector<float> random_vector(std::mt19937& rng, int n) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace

TEST_CASE("a quarter turn moves adjacent pairs in normal mode and split halves in NeoX mode", "[kernels][rope]") {
  // base 1 gives every pair the same angle: position 1 * freq_scale pi/2 = a quarter turn,
  // (a, b) -> (-b, a). n_rot 4 of 6 dimensions: the last two stay.
  RopeParams p;
  p.n_rot = 4;
  p.freq_base = 1.0f;
  p.freq_scale = float(kPi / 2);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};

  p.mode = RopeMode::Normal;   // pairs (0,1) (2,3)
  const std::vector<float> normal = rotated(x, 1, p);
  const std::vector<float> expected_normal = {-2, 1, -4, 3, 5, 6};
  p.mode = RopeMode::Neox;     // pairs (0,2) (1,3)
  const std::vector<float> neox = rotated(x, 1, p);
  const std::vector<float> expected_neox = {-3, -4, 1, 2, 5, 6};
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(normal[i] == Approx(expected_normal[i]).margin(1e-6));
    CHECK(neox[i] == Approx(expected_neox[i]).margin(1e-6));
  }
}

TEST_CASE("a frequency factor divides its pair's angle", "[kernels][rope]") {
  // freq_scale pi with factors {1, 2}: pair 0 turns by pi (negated), pair 1 by pi/2.
  const float factors[] = {1.0f, 2.0f};
  RopeParams p;
  p.n_rot = 4;
  p.freq_base = 1.0f;
  p.freq_scale = float(kPi);
  p.freq_factors = factors;
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> expected_normal = {-1, -2, -4, 3};
  const std::vector<float> expected_neox = {-1, -4, -3, 2};   // values (1,3) and (2,4) pair up
  p.mode = RopeMode::Normal;
  const std::vector<float> normal = rotated(x, 1, p);
  p.mode = RopeMode::Neox;
  const std::vector<float> neox = rotated(x, 1, p);
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(normal[i] == Approx(expected_normal[i]).margin(1e-6));
    CHECK(neox[i] == Approx(expected_neox[i]).margin(1e-6));
  }
}

TEST_CASE("rope with frequency factors and linear scaling equals the direct formula", "[kernels][rope]") {
  const RopeMode mode = GENERATE(RopeMode::Normal, RopeMode::Neox);
  const int head_dim = GENERATE(8, 64, 128);
  const bool partial_rotary = GENERATE(false, true);
  const int n_rot = partial_rotary ? head_dim / 2 : head_dim;
  const float freq_scale = GENERATE(1.0f, 0.25f);
  const bool with_factors = GENERATE(false, true);
  std::mt19937 rng(uint32_t(head_dim * 7 + n_rot));
  std::vector<float> factors(static_cast<size_t>(n_rot / 2));
  std::uniform_real_distribution<float> factor_dist(1.0f, 8.0f);
  for (float& f : factors) f = factor_dist(rng);
  RopeParams p;
  p.n_rot = n_rot;
  p.freq_base = 500000.0f;
  p.freq_scale = freq_scale;
  p.freq_factors = with_factors ? factors.data() : nullptr;
  p.mode = mode;
  for (int32_t position : {0, 1, 5, 37, 200}) {
    const std::vector<float> x = random_vector(rng, head_dim);
    const std::vector<float> got = rotated(x, position, p);
    const std::vector<double> want = direct_rope(x, position, p);
    double worst = 0;
    for (int i = 0; i < head_dim; ++i) worst = std::max(worst, std::fabs(got[size_t(i)] - want[size_t(i)]));
    INFO("mode " << int(mode) << " head_dim " << head_dim << " n_rot " << n_rot << " scale " << freq_scale
                 << " factors " << with_factors << " position " << position);
    // Angles are f32 (an angle of 200 carries 1e-5 of rounding) and base^(-2i/n_rot) is built
    // by repeated f32 multiplication, as ggml does; both stay far below this bound.
    CHECK(worst < 2e-4);
    for (int i = n_rot; i < head_dim; ++i) CHECK(got[size_t(i)] == x[size_t(i)]);
  }
}

TEST_CASE("the dot product of two rotated vectors depends only on their distance", "[kernels][rope]") {
  const RopeMode mode = GENERATE(RopeMode::Normal, RopeMode::Neox);
  std::mt19937 rng(7);
  const int d = 32;
  std::vector<float> factors(d / 2);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + float(i % 4);
  RopeParams p;
  p.n_rot = d;
  p.freq_base = 10000.0f;
  p.freq_factors = factors.data();
  p.mode = mode;
  const std::vector<float> q = random_vector(rng, d);
  const std::vector<float> k = random_vector(rng, d);
  auto score = [&](int32_t q_pos, int32_t k_pos) {
    const std::vector<float> a = rotated(q, q_pos, p);
    const std::vector<float> b = rotated(k, k_pos, p);
    double s = 0;
    for (int i = 0; i < d; ++i) s += double(a[size_t(i)]) * b[size_t(i)];
    return s;
  };
  CHECK(score(9, 4) == Approx(score(5, 0)).margin(1e-4));
  CHECK(score(30, 27) == Approx(score(3, 0)).margin(1e-4));
  CHECK(score(9, 4) != Approx(score(9, 5)).margin(1e-4));
}

TEST_CASE("YaRN keeps the fast pairs' angles, interpolates the slow ones and scales cos and sin", "[kernels][rope]") {
  // transformers' YaRN with factor 4 over an original context of 1024 at base 10000, 16 pairs:
  // the correction range is pairs 2..9 (ggml_rope_yarn_corr_dims), pairs 0 and 1 keep their
  // trained angles, pairs past 9 turn 4x slower, and cos and sin grow by 1 + 0.1 ln 4.
  const ops::YarnRange range = ops::yarn_correction_range(32, 1024, 10000.0f, 32.0f, 1.0f);
  CHECK(range.low == 2.0f);
  CHECK(range.high == 9.0f);
  RopeParams p;
  p.n_rot = 32;
  p.freq_base = 10000.0f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.yarn_low = range.low;
  p.yarn_high = range.high;
  const int32_t position = 300;
  std::vector<float> cos_sin(32);
  ops::rope_angles(position, p, cos_sin.data());
  const double mscale = 1 + 0.1 * std::log(4.0);
  for (int i = 0; i < 16; ++i) {
    const double inv_freq = std::pow(10000.0, -2.0 * i / 32);
    const double extrapolation = 1 - std::clamp((i - 2.0) / (9.0 - 2.0), 0.0, 1.0);
    const double theta = position * (inv_freq / 4 * (1 - extrapolation) + inv_freq * extrapolation);
    INFO("pair " << i);
    CHECK(cos_sin[size_t(2 * i)] == Approx(mscale * std::cos(theta)).margin(2e-4));
    CHECK(cos_sin[size_t(2 * i + 1)] == Approx(mscale * std::sin(theta)).margin(2e-4));
  }
  // Without the ext factor the same parameters are plain linear scaling.
  p.ext_factor = 0.0f;
  ops::rope_angles(position, p, cos_sin.data());
  CHECK(cos_sin[2] == Approx(std::cos(position * 0.25 * std::pow(10000.0, -2.0 / 32))).margin(2e-4));
}
