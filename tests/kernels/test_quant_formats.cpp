// Properties every block-quantized weight format with a scale per sub-block shares (the
// sub-block formats Q4_1 ... Q6_K and the low-bit Q2_K ... IQ4_XS, MXFP4): ggml's block geometry and
// computable against their activation format, rows survive quantize ->
// dequantize within bounds set by their bits, zero rows stay zero, ref dots equal
// dequantize-then-multiply against the quantized activations, and every SIMD dot matches ref.
// The hand-built blocks that pin each layout are in test_subblock_quants.cpp and
// test_lowbit_quants.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/dot.h"
#include "kernels/ggml_types.h"
#include "kernels/quantize.h"
#include "tests/kernels/quant_test_support.h"
#include "tests/kernels/simd_isas.h"

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

// Each format with the bounds its quantize -> dequantize round trip of N(0, 1) values keeps.
// Sub-block formats: NMSE about step^2 / 12 over the value spread, 2x headroom; values span
// about +-4 and one 4-bit step is under 0.6. Low-bit formats: about 1.5x headroom over what
// these quantizers reach (NMSE 0.006 IQ4_NL / IQ4_XS, 0.022 Q3_K, 0.11 Q2_K with its 4-bit
// scales and mins); MXFP4 reaches 0.013-0.021 with its power-of-two scales, and ggml's exponent
// choice clips a block's largest value by up to a quarter (0.9 seen).
struct FormatBounds {
  GgmlType type;
  double max_nmse;
  double max_abs;
};
constexpr FormatBounds kFormats[] = {
    {GgmlType::Q4_1, 0.02, 0.5},    {GgmlType::Q5_0, 0.006, 0.5},  {GgmlType::Q5_1, 0.005, 0.5},
    {GgmlType::Q4_K, 0.025, 0.5},   {GgmlType::Q5_K, 0.006, 0.5},  {GgmlType::Q6_K, 0.0015, 0.5},
    {GgmlType::Q2_K, 0.16, 1.4},    {GgmlType::Q3_K, 0.033, 0.9},  {GgmlType::IQ4_NL, 0.009, 0.35},
    {GgmlType::IQ4_XS, 0.009, 0.35}, {GgmlType::MXFP4, 0.035, 1.4}};

// Each format's ggml geometry: a row of `values` takes `row_bytes`, and its dots read act rows
// of `act` blocks.
struct FormatGeometry {
  GgmlType type;
  int64_t values;
  size_t row_bytes;
  ActFormat act;
};
constexpr FormatGeometry kGeometry[] = {
    {GgmlType::Q4_1, 64, 40, ActFormat::Q8Act},   {GgmlType::Q5_0, 64, 44, ActFormat::Q8Act},
    {GgmlType::Q5_1, 64, 48, ActFormat::Q8Act},   {GgmlType::Q4_K, 512, 288, ActFormat::Q8K},
    {GgmlType::Q5_K, 512, 352, ActFormat::Q8K},   {GgmlType::Q6_K, 512, 420, ActFormat::Q8K},
    {GgmlType::Q2_K, 512, 168, ActFormat::Q8Act}, {GgmlType::Q3_K, 512, 220, ActFormat::Q8Act},
    {GgmlType::IQ4_NL, 64, 36, ActFormat::Q8Act}, {GgmlType::IQ4_XS, 512, 272, ActFormat::Q8Act},
    {GgmlType::MXFP4, 64, 34, ActFormat::Q8Act}};

// The activation values a prepared row stands for: a.d * a.qs[i] of its BlockQ8Act or BlockQ8K.
std::vector<double> act_values(GgmlType type, const std::vector<uint8_t>& act, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (act_format_for(type) == ActFormat::Q8K) {
      const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(act.data())[i / kQ8KBlockValues];
      v[static_cast<size_t>(i)] = static_cast<double>(a.d) * a.qs[i % kQ8KBlockValues];
    } else {
      const BlockQ8Act& a = reinterpret_cast<const BlockQ8Act*>(act.data())[i / kQ8ActBlockValues];
      v[static_cast<size_t>(i)] = static_cast<double>(a.d) * a.qs[i % kQ8ActBlockValues];
    }
  }
  return v;
}

}  // namespace

TEST_CASE("the sub-block and low-bit formats are computable with ggml's block geometry", "[kernels][subblock][lowbit]") {
  for (const FormatGeometry& g : kGeometry) {
    INFO("type " << ggml_type_info(g.type).name);
    CHECK(ggml_type_info(g.type).computable);
    CHECK(ggml_row_bytes(g.type, g.values) == g.row_bytes);
    CHECK(act_format_for(g.type) == g.act);
    const size_t act_bytes = g.act == ActFormat::Q8K ? g.values / kQ8KBlockValues * sizeof(BlockQ8K)
                                                     : g.values / kQ8ActBlockValues * sizeof(BlockQ8Act);
    CHECK(act_row_bytes(g.type, g.values) == act_bytes);
  }
}

TEST_CASE("quantize then dequantize stays within each format's error", "[kernels][subblock][lowbit]") {
  const int64_t n = 4096;
  const std::vector<float> x = random_values(n, 41);
  for (const FormatBounds& f : kFormats) {
    const std::vector<uint8_t> w = quantized(f.type, x);
    const std::vector<float> y = dequantized(f.type, w.data(), n);
    double err = 0.0, ref = 0.0, max_err = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      ref += double(x[i]) * x[i];
      max_err = std::fmax(max_err, std::fabs(double(y[i]) - x[i]));
    }
    INFO("type " << ggml_type_info(f.type).name << " nmse " << err / ref << " max " << max_err);
    CHECK(err / ref < f.max_nmse);
    CHECK(max_err < f.max_abs);
  }
}

TEST_CASE("all-zero rows quantize to zeros in every sub-block and low-bit format", "[kernels][subblock][lowbit]") {
  const std::vector<float> zeros(256, 0.0f);
  for (const FormatBounds& f : kFormats) {
    const std::vector<uint8_t> w = quantized(f.type, zeros);
    const std::vector<float> y = dequantized(f.type, w.data(), 256);
    INFO("type " << ggml_type_info(f.type).name);
    CHECK(y == zeros);
  }
}

TEST_CASE("ref sub-block and low-bit dots equal the dot of the dequantized rows", "[kernels][subblock][lowbit]") {
  // ref::vec_dot(w, a) = sum_i deq(w)[i] * a.d * a.qs[i]; checked in double.
  for (const FormatBounds& f : kFormats) {
    for (int64_t n : sizes_for(f.type)) {
      const std::vector<uint8_t> w = quantized(f.type, random_values(n, 51));
      const std::vector<uint8_t> act = prepared_act(f.type, random_values(n, 52));
      const std::vector<float> wf = dequantized(f.type, w.data(), n);
      const std::vector<double> a = act_values(f.type, act, n);
      double want = 0.0;
      for (size_t i = 0; i < a.size(); ++i) want += wf[i] * a[i];
      INFO("type " << ggml_type_info(f.type).name << " n " << n);
      CHECK(ref::vec_dot(f.type, w.data(), act.data(), n) == Approx(want).epsilon(1e-5).margin(1e-6));
    }
  }
}

TEST_CASE("SIMD sub-block and low-bit dots match ref within 1e-10 NMSE", "[kernels][subblock][lowbit]") {
  for (const FormatBounds& f : kFormats) {
    for (int64_t n : sizes_for(f.type)) {
      const int64_t rows = 9;
      const size_t row_bytes = ggml_row_bytes(f.type, n);
      std::vector<uint8_t> w;
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint8_t> row = quantized(f.type, random_values(n, 60 + static_cast<uint32_t>(r)));
        w.insert(w.end(), row.begin(), row.end());
      }
      const std::vector<uint8_t> act = prepared_act(f.type, random_values(n, 70));
      for_each_simd_isa([&](CpuIsa isa) {
        double err = 0.0, ref = 0.0;
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* row = w.data() + row_bytes * static_cast<size_t>(r);
          const double got = cpu::vec_dot(f.type, row, act.data(), n);
          const double want = ref::vec_dot(f.type, row, act.data(), n);
          err += (got - want) * (got - want);
          ref += want * want;
        }
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(f.type).name << " n " << n);
        CHECK(err / ref < 1e-10);
      });
    }
  }
}
