// Row quantizers against hand-computed blocks and scale-derived error bounds, and the scalar
// fp16 / bf16 conversions on every edge case (denormals, rounding ties, overflow, inf, NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/fp16.h"
#include "kernels/ggml_types.h"
#include "kernels/quantize.h"

using namespace kvdesk;

namespace {

// [n] values whose magnitudes vary by block, so scales differ from block to block.
std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> magnitude(-4.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = std::pow(10.0f, magnitude(rng));
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(b * 32 + i)] = scale * normal(rng);
  }
  return x;
}

float block_amax(const float* x) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  return amax;
}

}  // namespace

TEST_CASE("Q8_0 quantization rounds half away from zero on a hand-built block", "[kernels][quantize]") {
  // amax = 127 gives d = 1 exactly, so qs = round(x) with ggml's roundf ties.
  float x[32] = {127.0f, -127.0f, 63.5f, -63.5f, 0.5f, -0.5f, 2.5f, 0.49f, -1.51f, 0.0f};
  BlockQ8_0 block;
  ref::quantize_row_q8_0(x, &block, 32);
  CHECK(block.d == 0x3C00);  // fp16(1.0)
  const int8_t expected[10] = {127, -127, 64, -64, 1, -1, 3, 0, -2, 0};
  for (int i = 0; i < 10; ++i) CHECK(block.qs[i] == expected[i]);
  for (int i = 10; i < 32; ++i) CHECK(block.qs[i] == 0);
}

TEST_CASE("Q4_0 quantization maps the signed extreme to nibble 0 on a hand-built block", "[kernels][quantize]") {
  // x = -8..7 then 7..-8: the first value of largest magnitude is -8, so d = -8 / -8 = 1 and
  // q = trunc(x + 8.5) = x + 8 exactly: low nibbles 0..15, high nibbles 15..0.
  float x[32];
  for (int i = 0; i < 16; ++i) {
    x[i] = static_cast<float>(i - 8);
    x[16 + i] = static_cast<float>(7 - i);
  }
  BlockQ4_0 block;
  ref::quantize_row_q4_0(x, &block, 32);
  CHECK(block.d == 0x3C00);
  for (int i = 0; i < 16; ++i) CHECK(block.qs[i] == (i | (15 - i) << 4));

  float y[32];
  ref::dequantize_row(GgmlType::Q4_0, &block, y, 32);
  for (int i = 0; i < 32; ++i) CHECK(y[i] == x[i]);
}

TEST_CASE("Q4_0 quantization of a positive extreme clamps its mirror image to nibble 15", "[kernels][quantize]") {
  // max = +4 -> d = -0.5, q = trunc(-2 x + 8.5): x = 4 -> 0 (value 4), x = -4 -> 16 -> 15
  // (value -0.5 * 7 = -3.5, off by exactly |d|), x = 1 -> 6 (value 1), x = 0 -> 8 (value 0).
  float x[32] = {4.0f, -4.0f, 1.0f, 0.0f};
  BlockQ4_0 block;
  ref::quantize_row_q4_0(x, &block, 32);
  CHECK(block.d == fp32_to_fp16(-0.5f));
  CHECK((block.qs[0] & 15) == 0);
  CHECK((block.qs[1] & 15) == 15);
  CHECK((block.qs[2] & 15) == 6);
  CHECK((block.qs[3] & 15) == 8);

  float y[32];
  ref::dequantize_row(GgmlType::Q4_0, &block, y, 32);
  CHECK(y[0] == 4.0f);
  CHECK(y[1] == -3.5f);
  CHECK(y[2] == 1.0f);
  CHECK(y[3] == 0.0f);
}

TEST_CASE("a hand-built Q4_0 block dequantizes to d * (nibble - 8)", "[kernels][quantize]") {
  // d = 0.5, qs[i] = i | (15 - i) << 4:
  //   values 0..15  = 0.5 * (i - 8)  = -4.0, -3.5, ..., 3.5
  //   values 16..31 = 0.5 * (7 - i)  =  3.5,  3.0, ..., -4.0
  BlockQ4_0 block;
  block.d = 0x3800;  // fp16(0.5)
  for (int i = 0; i < 16; ++i) block.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  float y[32];
  ref::dequantize_row(GgmlType::Q4_0, &block, y, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(y[i] == -4.0f + 0.5f * i);
    CHECK(y[16 + i] == 3.5f - 0.5f * i);
  }
}

TEST_CASE("all-zero blocks quantize to a zero scale and dequantize to zeros", "[kernels][quantize]") {
  const std::vector<float> zeros(64, 0.0f);
  BlockQ8_0 q8[2];
  BlockQ4_0 q4[2];
  ref::quantize_row_q8_0(zeros.data(), q8, 64);
  ref::quantize_row_q4_0(zeros.data(), q4, 64);
  float y[64];
  ref::dequantize_row(GgmlType::Q8_0, q8, y, 64);
  for (float v : y) CHECK(v == 0.0f);
  ref::dequantize_row(GgmlType::Q4_0, q4, y, 64);
  for (float v : y) CHECK(v == 0.0f);
}

TEST_CASE("Q8_0 round trips stay within half a step of the block scale", "[kernels][quantize]") {
  // |x - fp16(d) q| <= |x - d q| + |d - fp16(d)| |q| <= d / 2 + 127 |d - fp16(d)|, d = amax / 127.
  const int64_t n = 4128;
  const std::vector<float> x = random_row(n, 1);
  std::vector<BlockQ8_0> q(static_cast<size_t>(n / 32));
  std::vector<float> y(static_cast<size_t>(n));
  ref::quantize_row(GgmlType::Q8_0, x.data(), q.data(), n);
  ref::dequantize_row(GgmlType::Q8_0, q.data(), y.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = block_amax(&x[static_cast<size_t>(b * 32)]) / 127.0f;
    const float d16 = fp16_to_fp32(q[static_cast<size_t>(b)].d);
    const float bound = d / 2 + 127 * std::fabs(d - d16) + 1e-6f * d;
    for (int i = 0; i < 32; ++i) {
      const size_t k = static_cast<size_t>(b * 32 + i);
      CHECK(std::fabs(x[k] - y[k]) <= bound);
    }
  }
}

TEST_CASE("Q4_0 round trips stay within one step of the block scale", "[kernels][quantize]") {
  // Rounding costs d / 2, except the mirror image of the extreme which clamps to 7 d instead of
  // 8 d: |x - fp16(d) (q - 8)| <= |d| + 8 |d - fp16(d)|, d = max / -8.
  const int64_t n = 4128;
  const std::vector<float> x = random_row(n, 2);
  std::vector<BlockQ4_0> q(static_cast<size_t>(n / 32));
  std::vector<float> y(static_cast<size_t>(n));
  ref::quantize_row(GgmlType::Q4_0, x.data(), q.data(), n);
  ref::dequantize_row(GgmlType::Q4_0, q.data(), y.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = block_amax(&x[static_cast<size_t>(b * 32)]) / 8.0f;
    const float d16 = std::fabs(fp16_to_fp32(q[static_cast<size_t>(b)].d));
    const float bound = d + 8 * std::fabs(d - d16) + 1e-6f * d;
    for (int i = 0; i < 32; ++i) {
      const size_t k = static_cast<size_t>(b * 32 + i);
      CHECK(std::fabs(x[k] - y[k]) <= bound);
    }
  }
}

TEST_CASE("float rows round trip exactly (F32) or within half an ulp (F16, BF16)", "[kernels][quantize]") {
  const int64_t n = 999;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  std::vector<uint8_t> row(ggml_row_bytes(GgmlType::F32, n));
  std::vector<float> y(static_cast<size_t>(n));

  ref::quantize_row(GgmlType::F32, x.data(), row.data(), n);
  ref::dequantize_row(GgmlType::F32, row.data(), y.data(), n);
  CHECK(y == x);

  ref::quantize_row(GgmlType::F16, x.data(), row.data(), n);
  ref::dequantize_row(GgmlType::F16, row.data(), y.data(), n);
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(y[i] - x[i]) <= std::fabs(x[i]) * 0x1p-11f);

  ref::quantize_row(GgmlType::BF16, x.data(), row.data(), n);
  ref::dequantize_row(GgmlType::BF16, row.data(), y.data(), n);
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(y[i] - x[i]) <= std::fabs(x[i]) * 0x1p-8f);
}

TEST_CASE("every fp16 value survives fp16 -> fp32 -> fp16, NaNs as NaNs", "[kernels][fp16]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (nan) {
      CHECK(std::isnan(f));
      const uint16_t back = fp32_to_fp16(f);
      CHECK(((back & 0x7C00) == 0x7C00 && (back & 0x03FF) != 0));
    } else {
      CHECK(fp32_to_fp16(f) == h);
    }
  }
}

TEST_CASE("fp16 conversion handles denormals, ties, overflow and infinities", "[kernels][fp16]") {
  CHECK(fp16_to_fp32(0x0001) == 0x1p-24f);           // smallest denormal
  CHECK(fp16_to_fp32(0x03FF) == 0x3FFp-24f);         // largest denormal
  CHECK(fp16_to_fp32(0x0400) == 0x1p-14f);           // smallest normal
  CHECK(fp16_to_fp32(0x7BFF) == 65504.0f);           // largest finite
  CHECK(fp16_to_fp32(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(fp16_to_fp32(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::signbit(fp16_to_fp32(0x8000)));

  CHECK(fp32_to_fp16(0x1p-25f) == 0x0000);           // half the smallest denormal: tie to even 0
  CHECK(fp32_to_fp16(0x3p-26f) == 0x0001);           // 0.75 of it rounds up
  CHECK(fp32_to_fp16(0x3p-25f) == 0x0002);           // 1.5 ulp: tie to even 2
  CHECK(fp32_to_fp16(1.0f + 0x1p-11f) == 0x3C00);    // tie to even, down
  CHECK(fp32_to_fp16(1.0f + 0x3p-11f) == 0x3C02);    // tie to even, up
  CHECK(fp32_to_fp16(65519.0f) == 0x7BFF);           // below the rounding edge
  CHECK(fp32_to_fp16(65520.0f) == 0x7C00);           // rounds to infinity
  CHECK(fp32_to_fp16(1e10f) == 0x7C00);
  CHECK(fp32_to_fp16(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(fp32_to_fp16(1e-10f) == 0x0000);
  CHECK(fp32_to_fp16(-0.0f) == 0x8000);
}

TEST_CASE("every non-NaN bf16 value survives bf16 -> fp32 -> bf16", "[kernels][fp16]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool nan = (h & 0x7F80) == 0x7F80 && (h & 0x007F) != 0;
    if (!nan) CHECK(fp32_to_bf16(bf16_to_fp32(static_cast<uint16_t>(h))) == h);
  }
}

TEST_CASE("bf16 conversion rounds ties to even and keeps NaN, inf and denormals", "[kernels][fp16]") {
  CHECK(fp32_to_bf16(1.0f + 0x1p-8f) == 0x3F80);     // tie, down to even
  CHECK(fp32_to_bf16(1.0f + 0x3p-8f) == 0x3F82);     // tie, up to even
  CHECK(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
  CHECK(fp32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(fp32_to_bf16(0x1p-133f) == 0x0001);          // smallest bf16 denormal
  CHECK(bf16_to_fp32(0x0001) == 0x1p-133f);
  CHECK(fp32_to_bf16(3.4e38f) == 0x7F80);            // rounds past the largest finite
  const uint16_t nan = fp32_to_bf16(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(bf16_to_fp32(nan)));
  // A NaN whose payload sits only in the low 16 bits must not truncate to infinity.
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(fp32_from_bits(0x7F800001u)))));
}
