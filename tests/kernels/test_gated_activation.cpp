// The gated activations of kernels/gated_activation.h against their scalar twins (ops::swiglu,
// ops::geglu_tanh, ops::swiglu_oai) and against the formulas in double, with cpu:: pinned to each
// SIMD ISA this CPU has and to the scalar path: gates across the range where the sigmoid goes from
// 0 to 1, gates at float's extremes, rows of every length modulo the vector width (the last
// partial vector goes through a padded copy), and h written over gate or over up.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/gated_activation.h"
#include "kernels/ops.h"
#include "tests/kernels/simd_isas.h"

using namespace kvdesk;

namespace {

struct Rows {
  std::vector<float> gate, up;
};

// Gates uniform in [-below, above] with a few exact values mixed in, ups standard normal.
Rows random_rows(int64_t n, float below, float above, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-below, above);
  std::normal_distribution<float> normal;
  Rows r;
  for (int64_t i = 0; i < n; ++i) {
    r.gate.push_back(uniform(rng));
    r.up.push_back(normal(rng));
  }
  const float exact[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -1e-30f};
  for (size_t i = 0; i < std::size(exact) && i < r.gate.size(); ++i) r.gate[i] = exact[i];
  return r;
}

double silu_times(double g, double up) { return g / (1.0 + std::exp(-g)) * up; }

// (1 + tanh(y)) / 2 as 1 / (1 + e^-2y): even in double, 1 + tanh(y) cancels for g below -5.
double gelu_tanh_times(double g, double up) {
  return g / (1.0 + std::exp(-2 * 0.7978845608028654 * (g + 0.044715 * g * g * g))) * up;
}

// |got - want| within `relative` of |want|, or of |g * up| (the gate's scale: where the
// sigmoid is tiny the result is too, and a float formula may round it differently) times
// `of_scale`, or below 1e-30.
void require_close(float got, double want, float g, float up, double relative, double of_scale) {
  const double error = std::abs(double(got) - want);
  INFO("gate " << g << " up " << up << ": got " << got << ", want " << want);
  REQUIRE((error <= relative * std::abs(want) || error <= of_scale * std::abs(double(g) * up) || error <= 1e-30));
}

// Runs body() with cpu:: pinned to every SIMD ISA this CPU has, then to the scalar path.
template <class Body>
void for_each_path(Body body) {
  test::for_each_simd_isa([&](CpuIsa) { body(); });
  cpu_isa_force(CpuIsa::Scalar);
  body();
  cpu_isa_force(cpu_isa_detected());
}

// gpt-oss: the gate capped at 7, up clamped to [-7, 7] and shifted by 1, sigmoid(1.702 g).
double swiglu_oai_times(double g, double up) {
  g = std::min(g, 7.0);
  return g / (1.0 + std::exp(-1.702 * g)) * (std::clamp(up, -7.0, 7.0) + 1);
}

}  // namespace

TEST_CASE("Vector clamped SwiGLU (gpt-oss) equals the scalar twin and the formula", "[kernels][gated_activation]") {
  for_each_path([] {
    for (const int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(13), int64_t(2880)}) {
      Rows r = random_rows(n, 60.0f, 20.0f, uint32_t(n + 5));
      for (float& u : r.up) u *= 5.0f;   // past the clamp at +-7 too
      std::vector<float> simd(static_cast<size_t>(n)), twin(static_cast<size_t>(n));
      cpu::swiglu_oai(r.gate.data(), r.up.data(), simd.data(), n);
      ops::swiglu_oai(r.gate.data(), r.up.data(), twin.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float g = r.gate[size_t(i)], up = r.up[size_t(i)];
        // z = 1.702 g rounds to float (about |z| ulp of 1, |z| up to 102 here), which e^-z turns
        // into a relative error, as for the GeGLU.
        require_close(simd[size_t(i)], swiglu_oai_times(g, up), g, up, 2e-5, 0);
        require_close(simd[size_t(i)], twin[size_t(i)], g, up, 2e-5, 0);
      }
    }
  });
}

TEST_CASE("Vector SwiGLU equals the scalar twin and the formula", "[kernels][gated_activation]") {
  for_each_path([] {
    for (const int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(13), int64_t(5632)}) {
      const Rows r = random_rows(n, 90.0f, 30.0f, uint32_t(n));
      std::vector<float> simd(static_cast<size_t>(n)), twin(static_cast<size_t>(n));
      cpu::swiglu(r.gate.data(), r.up.data(), simd.data(), n);
      ops::swiglu(r.gate.data(), r.up.data(), twin.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float g = r.gate[size_t(i)], up = r.up[size_t(i)];
        require_close(simd[size_t(i)], silu_times(g, up), g, up, 1e-6, 0);
        require_close(simd[size_t(i)], twin[size_t(i)], g, up, 1e-6, 0);
      }
    }
  });
}

TEST_CASE("Vector GeGLU (tanh form) equals the formula, and the scalar twin within its cancellation",
          "[kernels][gated_activation]") {
  for_each_path([] {
    for (const int64_t n : {int64_t(5), int64_t(16), int64_t(2051)}) {
      const Rows r = random_rows(n, 12.0f, 12.0f, uint32_t(100 + n));
      std::vector<float> simd(static_cast<size_t>(n)), twin(static_cast<size_t>(n));
      cpu::geglu_tanh(r.gate.data(), r.up.data(), simd.data(), n);
      ops::geglu_tanh(r.gate.data(), r.up.data(), twin.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float g = r.gate[size_t(i)], up = r.up[size_t(i)];
        // The scalar path is the twin, whose 1 + tanh(y) in float loses up to 6e-8 absolutely
        // where tanh(y) is near -1; the vector path carries z's float rounding (about |z| ulp
        // of 1, |z| up to 87 here), which e^-z turns into a relative error.
        const bool twin_path = cpu_isa_active() == CpuIsa::Scalar;
        require_close(simd[size_t(i)], gelu_tanh_times(g, up), g, up, 4e-5, twin_path ? 1e-6 : 0);
        require_close(simd[size_t(i)], twin[size_t(i)], g, up, 4e-5, 1e-6);
      }
    }
  });
}

TEST_CASE("Gates at float's extremes: 0 far below, g * up far above, NaN stays NaN", "[kernels][gated_activation]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kMax = std::numeric_limits<float>::max();
  const float gate[11] = {-kInf, -kMax, -1e30f, -200.0f, -88.5f, 88.5f, 200.0f, 1e30f, NAN, 3.0f, -3.0f};
  const float up[11] = {1, 1, 2, 1, 1, 1, 1, 0.5f, 1, 1, 1};
  for_each_path([&] {
    float h[11], twin[11];
    cpu::swiglu(gate, up, h, 11);
    ops::swiglu(gate, up, twin, 11);
    REQUIRE(std::isnan(h[0]));      // -inf / inf, as the twin
    REQUIRE(std::isnan(twin[0]));
    for (int i = 1; i <= 4; ++i) REQUIRE(std::abs(h[i]) <= 1e-30f);
    REQUIRE(h[5] == Approx(88.5f));
    REQUIRE(h[6] == 200.0f);
    REQUIRE(h[7] == 0.5e30f);
    REQUIRE(std::isnan(h[8]));
    for (int i = 1; i < 11; ++i) {
      if (i != 8) REQUIRE(h[i] == Approx(twin[i]).margin(1e-30));
    }
    cpu::geglu_tanh(gate, up, h, 11);
    for (int i = 1; i <= 4; ++i) REQUIRE(std::abs(h[i]) <= 1e-30f);
    REQUIRE(h[6] == 200.0f);
    REQUIRE(std::isnan(h[8]));
  });
}

TEST_CASE("Gated activations write over the gate row or the up row", "[kernels][gated_activation]") {
  for_each_path([] {
    const Rows r = random_rows(37, 8.0f, 8.0f, 7);
    std::vector<float> apart(r.gate.size());
    for (const bool silu : {true, false}) {
      const auto run = [silu](const float* gate, const float* up, float* h) {
        silu ? cpu::swiglu(gate, up, h, 37) : cpu::geglu_tanh(gate, up, h, 37);
      };
      run(r.gate.data(), r.up.data(), apart.data());
      std::vector<float> over_gate = r.gate, over_up = r.up;
      run(over_gate.data(), r.up.data(), over_gate.data());
      run(r.gate.data(), over_up.data(), over_up.data());
      REQUIRE(over_gate == apart);
      REQUIRE(over_up == apart);
    }
  });
}

TEST_CASE("An empty row writes nothing", "[kernels][gated_activation]") {
  for_each_path([] {
    float h = 5.0f;
    const float g = 1.0f, up = 1.0f;
    cpu::swiglu(&g, &up, &h, 0);
    cpu::geglu_tanh(&g, &up, &h, 0);
    REQUIRE(h == 5.0f);
  });
}
