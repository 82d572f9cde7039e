// The low-bit weight formats Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4: hand-built blocks dequantize to
// values worked out from the ggml layout, IQ4_NL's scale search beats the plain scale, and
// the SIMD dots stay exact on extreme quants. The geometry, round-trip and dot properties they
// share with the sub-block formats are in test_quant_formats.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dot.h"
#include "kernels/ggml_types.h"
#include "kernels/quantize.h"
#include "tests/kernels/quant_test_support.h"
#include "tests/kernels/simd_isas.h"

using namespace kvdesk;
using namespace kvdesk::test;

TEST_CASE("a hand-built Q2_K block dequantizes to d * sc * q - dmin * m per 16 values", "[kernels][lowbit]") {
  // d = 1, dmin = 0.5; scales[i] = i | (15 - i) << 4 (sc = i, m = 15 - i); every qs byte 0xE4
  // (bit pairs 0, 1, 2, 3: quarter k has q = k) except qs[33] = 0x1B (pairs 3, 2, 1, 0), which
  // holds values 129, 161, 193, 225. value v = (v / 16) * q - 0.5 * (15 - v / 16).
  BlockQ2_K b;
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  std::memset(b.qs, 0xE4, sizeof(b.qs));
  b.qs[33] = 0x1B;
  const std::vector<float> y = dequantized(GgmlType::Q2_K, &b, 256);
  CHECK(y[0] == -7.5f);    // sc 0, q 0, m 15
  CHECK(y[16] == -7.0f);   // sc 1, q 0, m 14
  CHECK(y[40] == -4.5f);   // sc 2, q 1, m 13
  CHECK(y[100] == 13.5f);  // sc 6, q 3, m 9
  CHECK(y[130] == -3.5f);  // sc 8, q 0, m 7
  CHECK(y[255] == 45.0f);  // sc 15, q 3, m 0
  CHECK(y[129] == 20.5f);  // sc 8, q 3
  CHECK(y[161] == 17.5f);  // sc 10, q 2, m 5
  CHECK(y[193] == 10.5f);  // sc 12, q 1, m 3
  CHECK(y[225] == -0.5f);  // sc 14, q 0, m 1
}

TEST_CASE("a hand-built Q3_K block unpacks 6-bit scales and the hmask bit", "[kernels][lowbit]") {
  // d = 0.5; sc[i] = 4i + 2 (sc - 32 = 4i - 30), packed by hand:
  //   bytes 0-7:  (sc[i] & 15) | (sc[i + 8] & 15) << 4 = 2|2<<4, 6|6<<4, 10|10<<4, 14|14<<4, (again)
  //   bytes 8-11: sc[j] >> 4 | (sc[j+4] >> 4) << 2 | (sc[j+8] >> 4) << 4 | (sc[j+12] >> 4) << 6
  //             = 0 | 1<<2 | 2<<4 | 3<<6
  // Every qs byte 0xE4 (quarter k: pair k); hmask 0x0F: values below 128 have the third bit
  // (q = k), values from 128 not (q = k - 4); hmask[5] = 0x8F gives value 229 the bit too.
  // value v = 0.5 * (4 (v / 16) - 30) * q.
  const uint8_t scales[12] = {34, 102, 170, 238, 34, 102, 170, 238, 228, 228, 228, 228};
  BlockQ3_K b;
  b.d = kHalfHalf;
  std::memcpy(b.scales, scales, sizeof(scales));
  std::memset(b.qs, 0xE4, sizeof(b.qs));
  std::memset(b.hmask, 0x0F, sizeof(b.hmask));
  b.hmask[5] = 0x8F;
  const std::vector<float> y = dequantized(GgmlType::Q3_K, &b, 256);
  CHECK(y[0] == 0.0f);      // sc -30, q 0
  CHECK(y[32] == -11.0f);   // sc -22, q 1
  CHECK(y[100] == -9.0f);   // sc -6, q 3
  CHECK(y[128] == -4.0f);   // sc 2, q -4
  CHECK(y[200] == -18.0f);  // sc 18, q -2
  CHECK(y[255] == -15.0f);  // sc 30, q -1
  CHECK(y[229] == 39.0f);   // sc 26, q 3 (third bit from hmask[5] bit 7)
  CHECK(y[228] == -13.0f);  // sc 26, q -1
}

TEST_CASE("a hand-built IQ4_NL block maps its nibbles through the level table", "[kernels][lowbit]") {
  // d = 0.5; qs[i] = i | (15 - i) << 4: value i = 0.5 * level[i], value i + 16 = 0.5 * level[15 - i].
  BlockIQ4_NL b;
  b.d = kHalfHalf;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const float half_levels[16] = {-63.5f, -52, -41.5f, -32.5f, -24.5f, -17.5f, -11, -5,
                                 0.5f,   6.5f, 12.5f, 19,     26.5f,  34.5f,  44.5f, 56.5f};
  const std::vector<float> y = dequantized(GgmlType::IQ4_NL, &b, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(y[static_cast<size_t>(i)] == half_levels[i]);
    CHECK(y[static_cast<size_t>(i + 16)] == half_levels[15 - i]);
  }
}

TEST_CASE("a hand-built MXFP4 block scales doubled E2M1 levels by 2^(e - 128)", "[kernels][lowbit]") {
  // e = 126: scale 2^-2, so value i = E2M1 code i at 2^-1; qs[i] = i | (15 - i) << 4.
  BlockMXFP4 b;
  b.e = 126;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const float e2m1_halves[16] = {0, 0.25f, 0.5f, 0.75f, 1, 1.5f, 2, 3, 0, -0.25f, -0.5f, -0.75f, -1, -1.5f, -2, -3};
  const std::vector<float> y = dequantized(GgmlType::MXFP4, &b, 32);
  for (int i = 0; i < 16; ++i) {
    CHECK(y[static_cast<size_t>(i)] == e2m1_halves[i]);
    CHECK(y[static_cast<size_t>(i + 16)] == e2m1_halves[15 - i]);
  }
  CHECK(mxfp4_scale(0) == std::ldexp(1.0f, -128));   // the denormal ends of E8M0
  CHECK(mxfp4_scale(1) == std::ldexp(1.0f, -127));
  CHECK(mxfp4_scale(254) == std::ldexp(1.0f, 126));
}

TEST_CASE("MXFP4 quantizes as ggml: exponent floor(log2 max) - 2, nearest level, clipped", "[kernels][lowbit]") {
  // max |x| = 5: exponent 2 - 2 = 0 (e = 127, scale 2^-1), levels 0 .. 6 in steps of E2M1.
  std::vector<float> x(32, 0.0f);
  x[0] = 5.0f;    // halfway between 4 and 6: the tie goes to the lower index, 4
  x[1] = -1.2f;   // -1
  x[2] = 0.2f;    // 0
  x[3] = 0.3f;    // 0.5
  x[16] = 2.6f;   // 3
  const std::vector<uint8_t> q = quantized(GgmlType::MXFP4, x);
  CHECK(reinterpret_cast<const BlockMXFP4*>(q.data())->e == 127);
  const std::vector<float> y = dequantized(GgmlType::MXFP4, q.data(), 32);
  CHECK(y[0] == 4.0f);
  CHECK(y[1] == -1.0f);
  CHECK(y[2] == 0.0f);
  CHECK(y[3] == 0.5f);
  CHECK(y[16] == 3.0f);
  // max |x| = 7.5 keeps exponent 0 (floor(log2 7.5) = 2): 7.5 clips to the largest level, 6.
  x[0] = 7.5f;
  CHECK(dequantized(GgmlType::MXFP4, quantized(GgmlType::MXFP4, x).data(), 32)[0] == 6.0f);
}

TEST_CASE("a hand-built IQ4_XS block unpacks its 6-bit sub-block scales", "[kernels][lowbit]") {
  // d = 1; ls[s] = 8s + 3 (ls - 32 = 8s - 29): low nibbles 3, 11, 3, 11, ... -> scales_l = 0xB3;
  // high bits 0, 0, 1, 1, 2, 2, 3, 3 -> scales_h = 1<<4 | 1<<6 | 2<<8 | 2<<10 | 3<<12 | 3<<14.
  // Every qs byte 0x29: values l < 16 take level[9] = 13, l >= 16 level[2] = -83.
  BlockIQ4_XS b;
  b.d = kHalfOne;
  std::memset(b.scales_l, 0xB3, sizeof(b.scales_l));
  b.scales_h = 0xFA50;
  std::memset(b.qs, 0x29, sizeof(b.qs));
  const std::vector<float> y = dequantized(GgmlType::IQ4_XS, &b, 256);
  for (int s = 0; s < 8; ++s) {
    INFO("sub-block " << s);
    CHECK(y[static_cast<size_t>(32 * s + 3)] == (8 * s - 29) * 13.0f);
    CHECK(y[static_cast<size_t>(32 * s + 20)] == (8 * s - 29) * -83.0f);
  }
  CHECK(y[0] == -377.0f);
  CHECK(y[255] == -2241.0f);
}

TEST_CASE("IQ4_NL's scale search beats the plain extreme / -127 scale", "[kernels][lowbit]") {
  // The candidate at t = 0 is the plain scale, so the fitted block is never worse; on normal
  // values it is strictly better over a row.
  const int64_t n = 4096;
  const std::vector<float> x = random_values(n, 43);
  const std::vector<float> y = dequantized(GgmlType::IQ4_NL, quantized(GgmlType::IQ4_NL, x).data(), n);
  double fitted = 0.0, plain = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x.data() + 32 * b;
    float extreme = 0.0f;
    for (int i = 0; i < 32; ++i) {
      if (std::fabs(xb[i]) > std::fabs(extreme)) extreme = xb[i];
    }
    const float scale = extreme / -127.0f;
    for (int i = 0; i < 32; ++i) {
      float best = 1e30f;
      for (int8_t level : kIq4nlValues) best = std::fmin(best, std::fabs(xb[i] - scale * level));
      plain += double(best) * best;
      const double e = double(y[static_cast<size_t>(32 * b + i)]) - xb[i];
      fitted += e * e;
    }
  }
  CHECK(fitted < plain);
}

TEST_CASE("SIMD low-bit dots are exact on blocks of extreme quants", "[kernels][lowbit]") {
  // The largest levels (IQ4: -127, 113; Q3_K: -4 and 3; Q2_K: 3) against activations of +-127:
  // the integer sums are as large as they get and must not saturate; unit scales keep every
  // partial sum an integer below 2^24, so any summation order gives the same float.
  const BlockQ8Act a = extreme_act_block();
  const std::vector<BlockQ8Act> acts(8, a);
  BlockIQ4_NL nl;
  nl.d = kHalfOne;
  for (int i = 0; i < 16; ++i) nl.qs[i] = static_cast<uint8_t>(i % 2 ? 0x0F : 0xF0);  // levels -127 / 113
  BlockIQ4_XS xs;
  xs.d = kHalfOne;
  xs.scales_h = 0xAAAA;  // ls = 33 (scale 1) in every sub-block
  std::memset(xs.scales_l, 0x11, sizeof(xs.scales_l));
  std::memset(xs.qs, 0x0F, sizeof(xs.qs));
  BlockQ3_K q3;
  q3.d = kHalfOne;
  const uint8_t unit_scales[12] = {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0xAA, 0xAA, 0xAA, 0xAA};  // sc 33
  std::memcpy(q3.scales, unit_scales, sizeof(unit_scales));
  std::memset(q3.qs, 0xFF, sizeof(q3.qs));
  std::memset(q3.hmask, 0x55, sizeof(q3.hmask));  // q = 3 and -1 alternating per 32 values
  q3.qs[0] = 0;                                   // value 0: q = 0 + 4 - 4 = 0, value 32: -4
  BlockMXFP4 fp4;
  fp4.e = 128;   // scale 1: levels -12 and 12
  for (int i = 0; i < 16; ++i) fp4.qs[i] = static_cast<uint8_t>(i % 2 ? 0x07 : 0xF7);
  BlockQ2_K q2;
  q2.d = kHalfOne;
  q2.dmin = kHalfOne;
  std::memset(q2.scales, 0x1F, sizeof(q2.scales));  // sc 15, m 1
  std::memset(q2.qs, 0xFF, sizeof(q2.qs));
  for_each_simd_isa([&](CpuIsa isa) {
    INFO("isa " << cpu_isa_name(isa));
    CHECK(cpu::vec_dot(GgmlType::IQ4_NL, &nl, &a, 32) == ref::vec_dot(GgmlType::IQ4_NL, &nl, &a, 32));
    CHECK(cpu::vec_dot(GgmlType::MXFP4, &fp4, &a, 32) == ref::vec_dot(GgmlType::MXFP4, &fp4, &a, 32));
    CHECK(cpu::vec_dot(GgmlType::IQ4_XS, &xs, acts.data(), 256) == ref::vec_dot(GgmlType::IQ4_XS, &xs, acts.data(), 256));
    CHECK(cpu::vec_dot(GgmlType::Q3_K, &q3, acts.data(), 256) == ref::vec_dot(GgmlType::Q3_K, &q3, acts.data(), 256));
    CHECK(cpu::vec_dot(GgmlType::Q2_K, &q2, acts.data(), 256) == ref::vec_dot(GgmlType::Q2_K, &q2, acts.data(), 256));
  });
}
