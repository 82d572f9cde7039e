// KV row formats: names, row sizes with their scales, fp8 codecs bit for bit, and round trips
// of every type within the error its format allows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kv_quant.h"

using namespace kvdesk;

namespace {

// An 8-bit float format for brute-force checks: kMant mantissa bits, smallest normal 2^min_exp.
struct Fp8Format {
  const char* name;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
  int mantissa_bits;
  int min_exp;
  float max;
};

const Fp8Format kE4M3{"e4m3", fp32_to_fp8_e4m3, fp8_e4m3_to_fp32, 3, -6, kFp8E4M3Max};
const Fp8Format kE5M2{"e5m2", fp32_to_fp8_e5m2, fp8_e5m2_to_fp32, 2, -14, kFp8E5M2Max};

// The code nearest to x among all finite codes, ties to the even code; saturating.
uint8_t nearest_code(const Fp8Format& f, float x) {
  int best = -1;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = f.decode(uint8_t(c));
    if (!std::isfinite(v) || std::signbit(v) != std::signbit(x)) continue;
    const double err = std::fabs(double(v) - double(x));
    if (err < best_err || (err == best_err && c % 2 == 0)) best = c, best_err = err;
  }
  return uint8_t(best);
}

std::vector<float> random_row(std::mt19937& rng, int d, float scale, bool outliers) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(d));
  for (float& v : x) v = scale * normal(rng);
  if (outliers) x[size_t(d) / 3] *= 12.0f;
  return x;
}

std::vector<float> round_trip(KvType type, const std::vector<float>& x) {
  const int d = int(x.size());
  std::vector<uint8_t> row(kv_row_bytes(type, d));
  std::vector<float> y(x.size());
  ref::quantize_kv_row(type, x.data(), row.data(), d);
  ref::dequantize_kv_row(type, row.data(), y.data(), d);
  return y;
}

float abs_max(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

// int8 / int4: half a step s of x[i]'s group, s = (max - m) / levels with m = f16(min) off by
// dm = half an f16 ulp of min, s stored as f16 rounded up (2^-10 relative, or one subnormal
// quantum 2^-24); values below m (when min rounds up) lose up to dm more.
float affine_error(const std::vector<float>& x, int i, KvType type, float levels) {
  const int d = int(x.size());
  // Groups of `group` values, the last one to the row's end (a short part, or a wider group).
  const int group = kv_row_group(type, d);
  const int last = kv_row_scales(type, d) - 1;
  const int g = std::min(i / group, last);
  const int begin = g * group;
  const int end = g == last ? d : begin + group;
  const float lo = *std::min_element(x.begin() + begin, x.begin() + end);
  const float hi = *std::max_element(x.begin() + begin, x.begin() + end);
  const float dm = std::fmax(std::fabs(lo) * 0x1p-11f, 0x1p-25f);
  const float s = (hi - lo + dm) / levels * (1.0f + 0x1p-9f) + 0x1p-24f;
  return s / 2.0f + dm;
}

// The largest error the format allows for x[i] (f32 rounding of the scale arithmetic aside,
// which the 1e-6 relative slack covers).
float allowed_error(KvType type, const std::vector<float>& x, int i) {
  const int d = int(x.size());
  const float a = std::fabs(x[size_t(i)]);
  const float amax = abs_max(x.data(), d);
  const float slack = 1e-6f * amax;
  switch (type) {
    case KvType::F32: return 0.0f;
    case KvType::F16: return std::fmax(a * 0x1p-11f, 0x1p-25f);   // half an ulp; subnormal quantum / 2
    case KvType::BF16: return a * 0x1p-8f;
    case KvType::FP8_E4M3: return std::fmax(a * 0x1p-4f, amax / kFp8E4M3Max * 0x1p-10f) + slack;
    case KvType::FP8_E5M2: return std::fmax(a * 0x1p-3f, amax / kFp8E5M2Max * 0x1p-17f) + slack;
    case KvType::INT8: return affine_error(x, i, KvType::INT8, kKvInt8Levels) + slack;
    case KvType::INT4: return affine_error(x, i, KvType::INT4, kKvInt4Levels) + slack;
  }
  return 0.0f;
}

}  // namespace

TEST_CASE("every kv type has a name that parses back", "[kernels][kv_quant]") {
  CHECK(all_kv_types().size() == 7);
  for (KvType t : all_kv_types()) {
    INFO(kv_type_name(t));
    REQUIRE(kv_type_from_name(kv_type_name(t)).has_value());
    CHECK(*kv_type_from_name(kv_type_name(t)) == t);
  }
  CHECK(kv_type_name(KvType::FP8_E4M3) == std::string("fp8_e4m3"));
  CHECK_FALSE(kv_type_from_name("q4_0").has_value());
  CHECK_FALSE(kv_type_from_name("").has_value());
}

TEST_CASE("row bytes count the scales", "[kernels][kv_quant]") {
  CHECK(kv_row_bytes(KvType::F32, 64) == 256);
  CHECK(kv_row_bytes(KvType::F16, 64) == 128);
  CHECK(kv_row_bytes(KvType::BF16, 64) == 128);
  CHECK(kv_row_bytes(KvType::FP8_E4M3, 64) == 68);
  CHECK(kv_row_bytes(KvType::FP8_E5M2, 64) == 68);
  CHECK(kv_row_bytes(KvType::INT8, 64) == 8 + 64);
  CHECK(kv_row_bytes(KvType::INT8, 80) == 12 + 80);    // 32 + 32 + 16: scales at 15%
  CHECK(kv_row_bytes(KvType::INT8, 72) == 8 + 72);     // 32 + 40: 32 + 32 + 8 would be 16.7%
  CHECK(kv_row_bytes(KvType::INT8, 40) == 4 + 40);     // one group of 40
  CHECK(kv_row_bytes(KvType::INT8, 8) == 4 + 8);
  CHECK(kv_row_bytes(KvType::INT4, 64) == 4 + 32);
  CHECK(kv_row_bytes(KvType::INT4, 128) == 8 + 64);
  CHECK(kv_row_bytes(KvType::INT4, 8) == 4 + 4);
  CHECK(kv_row_bytes(KvType::INT4, 80) == 4 + 40);     // one group of 80
  CHECK(kv_row_bytes(KvType::INT4, 96) == 4 + 48);
  CHECK(kv_row_bytes(KvType::INT4, 160) == 12 + 80);   // 64 + 64 + 32: scales at 15%
  CHECK(kv_row_bytes(KvType::INT4, 144) == 8 + 72);    // 64 + 80
}

// Multiples of int4's group of 64 and the head dims between them that real models use (Phi-2's
// 80, Phi-3's 96): where a short last group would cost more, a row ends in one wider group.
TEST_CASE("quantized rows cost at most 15% over their bare bit width from head_dim 64", "[kernels][kv_quant]") {
  const int d = GENERATE(64, 72, 80, 96, 112, 128, 160, 192, 256);
  for (auto [type, bits] : {std::pair{KvType::FP8_E4M3, 8}, {KvType::FP8_E5M2, 8}, {KvType::INT8, 8}, {KvType::INT4, 4}}) {
    INFO(kv_type_name(type) << " head_dim " << d);
    CHECK(double(kv_row_bytes(type, d)) <= 1.15 * d * bits / 8);
  }
}

TEST_CASE("affine int rows spend every level on a group with an outlier of one sign", "[kernels][kv_quant]") {
  // Eight values of a few units and one +28 channel, as stories260K's keys: a symmetric grid
  // would leave half its levels on the empty negative side.
  const std::vector<float> x = {0.4f, -1.3f, 2.2f, 28.0f, -0.7f, 1.1f, -2.5f, 0.9f};
  for (auto [type, levels] : {std::pair{KvType::INT8, kKvInt8Levels}, {KvType::INT4, kKvInt4Levels}}) {
    const std::vector<float> y = round_trip(type, x);
    const float step = (28.0f + 2.5f) / levels;
    for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(y[i] - x[i]) <= step * 0.51f);
  }
}

TEST_CASE("fp8 codes decode and encode back to themselves", "[kernels][kv_quant]") {
  for (const Fp8Format* f : {&kE4M3, &kE5M2}) {
    INFO(f->name);
    for (int c = 0; c < 256; ++c) {
      const float v = f->decode(uint8_t(c));
      INFO("code " << c << " value " << v);
      if (std::isnan(v)) {
        CHECK(std::isnan(f->decode(f->encode(v))));
      } else if (std::isfinite(v)) {
        CHECK(f->encode(v) == c);
      }
    }
    CHECK(f->decode(f->encode(f->max)) == f->max);
  }
  CHECK(fp8_e4m3_to_fp32(0x7E) == 448.0f);
  CHECK(fp8_e4m3_to_fp32(0x01) == 0x1p-9f);
  CHECK(fp8_e5m2_to_fp32(0x7B) == 57344.0f);
  CHECK(fp8_e5m2_to_fp32(0x01) == 0x1p-16f);
}

TEST_CASE("fp8 encoding rounds to the nearest code with ties to even and saturates", "[kernels][kv_quant]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (const Fp8Format* f : {&kE4M3, &kE5M2}) {
    INFO(f->name);
    std::uniform_int_distribution<int> exponent(f->min_exp - f->mantissa_bits - 2, int(std::log2(f->max)) + 1);
    for (int i = 0; i < 20000; ++i) {
      const float x = (i % 2 ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), exponent(rng));
      INFO("x = " << x);
      REQUIRE(f->encode(x) == nearest_code(*f, x));
    }
    // Exact midpoints between neighbouring codes go to the even one.
    for (int c = 0; c < 0x7B; ++c) {
      const float lo = f->decode(uint8_t(c));
      const float hi = f->decode(uint8_t(c + 1));
      const float mid = (lo + hi) / 2;
      INFO("between codes " << c << " and " << c + 1);
      CHECK(f->encode(mid) == (c % 2 == 0 ? c : c + 1));
    }
    CHECK(f->decode(f->encode(1e30f)) == f->max);
    CHECK(f->decode(f->encode(-INFINITY)) == -f->max);
    CHECK(std::isnan(f->decode(f->encode(NAN))));
  }
}

TEST_CASE("quantized rows round-trip within the error their format allows", "[kernels][kv_quant]") {
  const KvType type = GENERATE(from_range(all_kv_types().begin(), all_kv_types().end()));
  const int d = GENERATE(8, 40, 64, 80, 96, 128, 160);
  const float scale = GENERATE(1e-3f, 1.0f, 300.0f);
  const bool outliers = GENERATE(false, true);
  std::mt19937 rng(d * 31 + int(scale * 10) + outliers);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> x = random_row(rng, d, scale, outliers);
    const std::vector<float> y = round_trip(type, x);
    for (int i = 0; i < d; ++i) {
      INFO(kv_type_name(type) << " d=" << d << " x=" << x[i] << " y=" << y[i]);
      REQUIRE(std::fabs(y[i] - x[i]) <= allowed_error(type, x, i));
    }
  }
}

TEST_CASE("writing a row touches only its own bytes and zero rows stay zero", "[kernels][kv_quant]") {
  const KvType type = GENERATE(from_range(all_kv_types().begin(), all_kv_types().end()));
  const int d = GENERATE(8, 64, 128);
  std::mt19937 rng(d);
  const std::vector<float> x = random_row(rng, d, 1.0f, false);
  const size_t bytes = kv_row_bytes(type, d);
  std::vector<uint8_t> buffer(bytes + 32, 0xAB);
  ref::quantize_kv_row(type, x.data(), buffer.data() + 16, d);
  for (size_t i = 0; i < 16; ++i) CHECK(buffer[i] == 0xAB);
  for (size_t i = bytes + 16; i < buffer.size(); ++i) CHECK(buffer[i] == 0xAB);

  const std::vector<float> zeros(size_t(d), 0.0f);
  for (float y : round_trip(type, zeros)) CHECK(y == 0.0f);
}
