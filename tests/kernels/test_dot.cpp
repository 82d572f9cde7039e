// Dot products: every SIMD path (forced AVX2 and AVX-512) against the scalar truth on odd sizes,
// activation quantization bit-exact against ref, and ref itself against dequantized rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/ggml_types.h"
#include "kernels/quantize.h"
#include "tests/kernels/quant_test_support.h"
#include "tests/kernels/simd_isas.h"

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

constexpr GgmlType kFloatTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};
constexpr GgmlType kQuantTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0};

// rows x n weights of `type`, quantized from normal values with ref::quantize_row.
std::vector<uint8_t> random_weights(GgmlType type, int64_t rows, int64_t n, uint32_t seed) {
  const size_t row_bytes = ggml_row_bytes(type, n);
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> x = random_values(n, seed + static_cast<uint32_t>(r));
    ref::quantize_row(type, x.data(), w.data() + row_bytes * static_cast<size_t>(r), n);
  }
  return w;
}

struct Nmse {
  double err = 0.0;
  double ref = 0.0;
  void add(double got, double want) {
    err += (got - want) * (got - want);
    ref += want * want;
  }
  double value() const { return ref > 0.0 ? err / ref : err; }
};

// NMSE of cpu::vec_dot against ref::vec_dot over `rows` weight rows and one act row.
double simd_dot_nmse(GgmlType type, int64_t n, int64_t rows) {
  const std::vector<uint8_t> w = random_weights(type, rows, n, 100);
  const std::vector<uint8_t> act = prepared_act(type, random_values(n, 7));
  const size_t row_bytes = ggml_row_bytes(type, n);
  Nmse nmse;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w.data() + row_bytes * static_cast<size_t>(r);
    nmse.add(cpu::vec_dot(type, row, act.data(), n), ref::vec_dot(type, row, act.data(), n));
  }
  return nmse.value();
}

}  // namespace

TEST_CASE("the dispatcher names ISAs and clamps a forced ISA to what the CPU has", "[kernels][dot]") {
  CHECK(std::string(cpu_isa_name(CpuIsa::Scalar)) == "scalar");
  CHECK(std::string(cpu_isa_name(CpuIsa::Avx2)) == "avx2");
  CHECK(std::string(cpu_isa_name(CpuIsa::AvxVnni)) == "avxvnni");
  CHECK(std::string(cpu_isa_name(CpuIsa::Avx512)) == "avx512-vnni");
  CHECK(cpu_isa_from_name("avxvnni") == CpuIsa::AvxVnni);
  CHECK(cpu_isa_from_name("avx-vnni") == CpuIsa::AvxVnni);
  cpu_isa_force(CpuIsa::Scalar);
  CHECK(cpu_isa_active() == CpuIsa::Scalar);
  cpu_isa_force(CpuIsa::Avx512);
  CHECK(cpu_isa_active() == cpu_isa_detected());
  // AVX-VNNI forced runs where the CPU has it, else falls to AVX2 (or scalar).
  cpu_isa_force(CpuIsa::AvxVnni);
  const CpuIsa fallback = cpu_isa_supported(CpuIsa::Avx2) ? CpuIsa::Avx2 : CpuIsa::Scalar;
  CHECK(cpu_isa_active() == (cpu_isa_supported(CpuIsa::AvxVnni) ? CpuIsa::AvxVnni : fallback));
  cpu_isa_force(cpu_isa_detected());
}

TEST_CASE("auto-detection prefers AVX-512, then AVX-VNNI, then AVX2", "[kernels][dot]") {
  const CpuIsa detected = cpu_isa_detected();
  CHECK(cpu_isa_supported(detected));
  if (cpu_isa_supported(CpuIsa::Avx512)) {
    CHECK(detected == CpuIsa::Avx512);
  } else if (cpu_isa_supported(CpuIsa::AvxVnni)) {
    CHECK(detected == CpuIsa::AvxVnni);
  } else if (cpu_isa_supported(CpuIsa::Avx2)) {
    CHECK(detected == CpuIsa::Avx2);
  }
  // Both 256-bit tiers need AVX2.
  if (cpu_isa_supported(CpuIsa::AvxVnni)) CHECK(cpu_isa_supported(CpuIsa::Avx2));
}

TEST_CASE("activation formats and row sizes follow the weight type", "[kernels][dot]") {
  CHECK(act_format_for(GgmlType::F32) == ActFormat::F32);
  CHECK(act_format_for(GgmlType::F16) == ActFormat::F32);
  CHECK(act_format_for(GgmlType::BF16) == ActFormat::F32);
  CHECK(act_format_for(GgmlType::Q8_0) == ActFormat::Q8Act);
  CHECK(act_format_for(GgmlType::Q4_0) == ActFormat::Q8Act);
  CHECK(act_format_for(GgmlType::Q4_K) == ActFormat::Q8K);
  CHECK(act_row_bytes(GgmlType::F16, 7) == 28);
  CHECK(act_row_bytes(GgmlType::Q4_0, 96) == 3 * sizeof(BlockQ8Act));
  CHECK(act_row_bytes(GgmlType::Q6_K, 768) == 3 * sizeof(BlockQ8K));
}

TEST_CASE("a hand-built activation block quantizes with ties to even", "[kernels][dot]") {
  // amax = 127 -> d = 1: qs = x rounded half to even, sum = their sum, low_sum that of the first 16.
  float x[32] = {127.0f, -127.0f, 2.5f, 3.5f, -2.5f, 0.5f, 1.5f, -0.49f};
  x[20] = 5.0f;
  BlockQ8Act a;
  ref::prepare_act_row(GgmlType::Q8_0, x, &a, 32);
  CHECK(a.d == 1.0f);
  const int8_t expected[8] = {127, -127, 2, 4, -2, 0, 2, 0};
  for (int i = 0; i < 8; ++i) CHECK(a.qs[i] == expected[i]);
  CHECK(a.qs[20] == 5);
  CHECK(a.low_sum == 127 - 127 + 2 + 4 - 2 + 0 + 2 + 0);
  CHECK(a.sum == a.low_sum + 5);
}

TEST_CASE("SIMD activation quantization matches ref bit for bit", "[kernels][dot]") {
  for_each_simd_isa([](CpuIsa isa) {
    for (int64_t n : {32, 64, 96, 4128, 11008}) {
      std::vector<float> x = random_values(n, static_cast<uint32_t>(n));
      x[static_cast<size_t>(n - 5)] = 1e30f;  // a block dominated by one value
      if (n > 32) std::fill(x.begin(), x.begin() + 32, 0.0f);  // an all-zero block: d = 0
      for (GgmlType type : kQuantTypes) {
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name << " n " << n);
        const std::vector<uint8_t> want = prepared_act(type, x);
        std::vector<uint8_t> got(want.size());
        cpu::prepare_act_row(type, x.data(), got.data(), n);
        CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
      }
    }
  });
}

TEST_CASE("a hand-built Q8K block quantizes with ties to even and sums of 16 values", "[kernels][dot]") {
  // amax = 254 -> d = 2: qs = x / 2 rounded half to even; bsums[k] sums qs[16k .. 16k + 15].
  float x[256] = {254.0f, -254.0f, 5.0f, 7.0f, -5.0f, 1.0f, 3.0f, -0.98f};
  x[16] = 9.0f;
  x[255] = -3.0f;
  BlockQ8K a;
  ref::prepare_act_row(GgmlType::Q4_K, x, &a, 256);
  CHECK(a.d == 2.0f);
  const int8_t expected[8] = {127, -127, 2, 4, -2, 0, 2, 0};
  for (int i = 0; i < 8; ++i) CHECK(a.qs[i] == expected[i]);
  CHECK(a.qs[16] == 4);
  CHECK(a.qs[255] == -2);
  CHECK(a.bsums[0] == 127 - 127 + 2 + 4 - 2 + 0 + 2 + 0);
  CHECK(a.bsums[1] == 4);
  for (int k = 2; k < 15; ++k) CHECK(a.bsums[k] == 0);
  CHECK(a.bsums[15] == -2);
}

TEST_CASE("SIMD Q8K activation quantization matches ref bit for bit", "[kernels][dot]") {
  for_each_simd_isa([](CpuIsa isa) {
    for (int64_t n : {256, 768, 4352, 11008}) {
      std::vector<float> x = random_values(n, static_cast<uint32_t>(n));
      x[static_cast<size_t>(n - 5)] = 1e30f;  // a super-block dominated by one value
      if (n > 256) std::fill(x.begin(), x.begin() + 256, 0.0f);  // an all-zero super-block: d = 0
      for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name << " n " << n);
        const std::vector<uint8_t> want = prepared_act(type, x);
        std::vector<uint8_t> got(want.size());
        cpu::prepare_act_row(type, x.data(), got.data(), n);
        CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
      }
    }
  });
}

TEST_CASE("SIMD float activation rows are plain copies", "[kernels][dot]") {
  for_each_simd_isa([](CpuIsa) {
    const std::vector<float> x = random_values(33, 5);
    for (GgmlType type : kFloatTypes) {
      std::vector<float> got(x.size());
      cpu::prepare_act_row(type, x.data(), got.data(), 33);
      CHECK(got == x);
    }
  });
}

TEST_CASE("SIMD float dots match ref within 1e-10 NMSE on odd sizes", "[kernels][dot]") {
  for_each_simd_isa([](CpuIsa isa) {
    for (GgmlType type : kFloatTypes) {
      for (int64_t n : {1, 7, 33, 4103}) {
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name << " n " << n);
        CHECK(simd_dot_nmse(type, n, 9) < 1e-10);
      }
    }
  });
}

TEST_CASE("SIMD integer dots match ref within 1e-10 NMSE on odd block counts", "[kernels][dot]") {
  // The integer block sums are exact; only the float accumulation order differs.
  for_each_simd_isa([](CpuIsa isa) {
    for (GgmlType type : kQuantTypes) {
      for (int64_t n : {32, 64, 96, 4128, 11008}) {
        INFO("isa " << cpu_isa_name(isa) << " type " << ggml_type_info(type).name << " n " << n);
        CHECK(simd_dot_nmse(type, n, 9) < 1e-10);
      }
    }
  });
}

TEST_CASE("SIMD integer dots are exact on single blocks with extreme quants", "[kernels][dot]") {
  // Quants at their extremes (Q8_0: -128 and 127, Q4_0: nibbles 0 and 15) against activations
  // of the same sign at +-127, so every pair of products is as large as it gets: the integer
  // sums must not saturate, and one block leaves no rounding to differ.
  BlockQ8_0 w8;
  BlockQ4_0 w4;
  w8.d = w4.d = 0x3C00;
  for (int i = 0; i < 32; ++i) w8.qs[i] = static_cast<int8_t>(i % 4 < 2 ? -128 : 127);
  for (int i = 0; i < 16; ++i) w4.qs[i] = static_cast<uint8_t>(i % 3 ? 0xF0 : 0x0F);
  BlockQ8Act a;
  a.d = 1.0f;
  for (int i = 0; i < 32; ++i) a.qs[i] = static_cast<int8_t>(i % 4 < 2 ? -127 : 127);
  set_act_sums(a);
  for_each_simd_isa([&](CpuIsa isa) {
    INFO("isa " << cpu_isa_name(isa));
    CHECK(cpu::vec_dot(GgmlType::Q8_0, &w8, &a, 32) == ref::vec_dot(GgmlType::Q8_0, &w8, &a, 32));
    CHECK(cpu::vec_dot(GgmlType::Q4_0, &w4, &a, 32) == ref::vec_dot(GgmlType::Q4_0, &w4, &a, 32));
  });
}

TEST_CASE("SIMD F16 and BF16 dots convert denormals, zeros and extremes exactly", "[kernels][dot]") {
  // One weight at a time against a one-hot activation returns that weight's float value.
  const uint16_t f16[] = {0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x8000, 0x3555};
  const uint16_t bf16[] = {0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x8000, 0x3F81};
  const int64_t n = 33;
  for_each_simd_isa([&](CpuIsa isa) {
    for (int64_t k : {0, 5, 31, 32}) {
      std::vector<float> a(static_cast<size_t>(n), 0.0f);
      a[static_cast<size_t>(k)] = 1.0f;
      std::vector<uint16_t> w(static_cast<size_t>(n), 0);
      for (uint16_t h : f16) {
        INFO("isa " << cpu_isa_name(isa) << " fp16 " << h << " at " << k);
        w[static_cast<size_t>(k)] = h;
        CHECK(cpu::vec_dot(GgmlType::F16, w.data(), a.data(), n) == fp16_to_fp32(h));
      }
      for (uint16_t h : bf16) {
        INFO("isa " << cpu_isa_name(isa) << " bf16 " << h << " at " << k);
        w[static_cast<size_t>(k)] = h;
        CHECK(cpu::vec_dot(GgmlType::BF16, w.data(), a.data(), n) == bf16_to_fp32(h));
      }
    }
  });
}

TEST_CASE("dots against all-zero activations are zero", "[kernels][dot]") {
  const int64_t n = 96;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                        GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int64_t values = ggml_type_info(type).block_values == kQK_K ? 3 * kQK_K : n;
    const std::vector<uint8_t> w = random_weights(type, 1, values, 11);
    const std::vector<uint8_t> act = prepared_act(type, std::vector<float>(static_cast<size_t>(values), 0.0f));
    CHECK(ref::vec_dot(type, w.data(), act.data(), values) == 0.0f);
    for_each_simd_isa([&](CpuIsa) { CHECK(cpu::vec_dot(type, w.data(), act.data(), values) == 0.0f); });
  }
}

TEST_CASE("ref quantized dots equal the dot of the dequantized rows", "[kernels][dot]") {
  // ref::vec_dot(w, a) = sum_i deq(w)[i] * a.d * a.qs[i]; checked in double.
  const int64_t n = 4128;
  for (GgmlType type : kQuantTypes) {
    const std::vector<uint8_t> w = random_weights(type, 1, n, 21);
    const std::vector<uint8_t> act = prepared_act(type, random_values(n, 22));
    std::vector<float> wf(static_cast<size_t>(n));
    ref::dequantize_row(type, w.data(), wf.data(), n);
    const BlockQ8Act* a = reinterpret_cast<const BlockQ8Act*>(act.data());
    double want = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(wf[static_cast<size_t>(i)]) * a[i / 32].d * a[i / 32].qs[i % 32];
    }
    INFO("type " << ggml_type_info(type).name);
    CHECK(ref::vec_dot(type, w.data(), act.data(), n) == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("quantized dots approximate the exact float dot within the quantization error", "[kernels][dot]") {
  // Q8_0 x Q8Act keeps ~2 decimal digits per value; over 4128 normal values the relative error
  // of the dot stays well under 5%, Q4_0 (4 bits) under 25%.
  const int64_t n = 4128;
  const std::vector<float> x = random_values(n, 31);
  std::vector<float> y = random_values(n, 32);
  for (size_t i = 0; i < x.size(); ++i) y[i] += 0.5f * x[i];
  double exact = 0.0;
  for (size_t i = 0; i < x.size(); ++i) exact += static_cast<double>(x[i]) * y[i];
  for (GgmlType type : kQuantTypes) {
    std::vector<uint8_t> w(ggml_row_bytes(type, n));
    ref::quantize_row(type, x.data(), w.data(), n);
    const std::vector<uint8_t> act = prepared_act(type, y);
    const double tolerance = type == GgmlType::Q8_0 ? 0.05 : 0.25;
    INFO("type " << ggml_type_info(type).name);
    CHECK(std::fabs(ref::vec_dot(type, w.data(), act.data(), n) - exact) < tolerance * std::fabs(exact));
  }
}
