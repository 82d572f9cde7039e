// The vector gated activations (kernels/gated_activation.h) against their scalar twins
// (ops::swiglu, ops::geglu_tanh) and against the formulas in double, on every SIMD ISA this CPU
// has: gates across the whole float range that matters (sigmoid from 0 to 1), rows whose
// length leaves a tail for the scalar loop, and h written over gate as the forward pass does.
#include <catch2/catch.hpp>

#include <cmath>
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

// Gates uniform in [-lo, hi] with a few exact values mixed in, ups standard normal.
Rows random_rows(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-lo, hi);
  std::normal_distribution<float> normal;
  Rows r;
  for (int64_t i = 0; i < n; ++i) {
    r.gate.push_back(uniform(rng));
    r.up.push_back(normal(rng));
  }
  const float exact[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -1e-30f};
  for (size_t i = 0; i < std::size(exact) && i < r.gate.size(); ++i) r.gate[i * 5 % r.gate.size()] = exact[i];
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

}  // namespace

TEST_CASE("Vector SwiGLU equals the scalar twin and the formula", "[kernels][gated_activation]") {
  test::for_each_simd_isa([](CpuIsa) {
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
  test::for_each_simd_isa([](CpuIsa) {
    for (const int64_t n : {int64_t(5), int64_t(16), int64_t(2051)}) {
      const Rows r = random_rows(n, 12.0f, 12.0f, uint32_t(100 + n));
      std::vector<float> simd(static_cast<size_t>(n)), twin(static_cast<size_t>(n));
      cpu::geglu_tanh(r.gate.data(), r.up.data(), simd.data(), n);
      ops::geglu_tanh(r.gate.data(), r.up.data(), twin.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float g = r.gate[size_t(i)], up = r.up[size_t(i)];
        // z's float rounding (about |z| ulp of 1, |z| up to 87 here) is e^-z's relative error.
        require_close(simd[size_t(i)], gelu_tanh_times(g, up), g, up, 4e-5, 0);
        // 1 + tanh(y) in float loses up to 6e-8 absolutely where tanh(y) is near -1.
        require_close(simd[size_t(i)], twin[size_t(i)], g, up, 4e-5, 1e-6);
      }
    }
  });
}

TEST_CASE("Vector gated activations write over the gate row", "[kernels][gated_activation]") {
  test::for_each_simd_isa([](CpuIsa) {
    const Rows r = random_rows(37, 8.0f, 8.0f, 7);
    std::vector<float> in_place = r.gate, apart(r.gate.size());
    cpu::swiglu(in_place.data(), r.up.data(), in_place.data(), 37);
    cpu::swiglu(r.gate.data(), r.up.data(), apart.data(), 37);
    REQUIRE(in_place == apart);
    in_place = r.gate;
    cpu::geglu_tanh(in_place.data(), r.up.data(), in_place.data(), 37);
    cpu::geglu_tanh(r.gate.data(), r.up.data(), apart.data(), 37);
    REQUIRE(in_place == apart);
  });
}

TEST_CASE("A NaN gate gives NaN on every path", "[kernels][gated_activation]") {
  const float gate[9] = {NAN, 1, 2, 3, 4, 5, 6, 7, NAN};
  const float up[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  test::for_each_simd_isa([&](CpuIsa) {
    float h[9];
    cpu::swiglu(gate, up, h, 9);
    REQUIRE(std::isnan(h[0]));
    REQUIRE(std::isnan(h[8]));
    cpu::geglu_tanh(gate, up, h, 9);
    REQUIRE(std::isnan(h[0]));
    REQUIRE(std::isnan(h[8]));
  });
}
