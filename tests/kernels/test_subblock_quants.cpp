// The sub-block weight formats Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K: hand-built blocks
// dequantize to values worked out from the ggml layout, ref dots stay within the activation
// rounding of the float dot, and the SIMD dots stay exact on extreme quants. The geometry,
// round-trip and dot properties they share with the low-bit formats are in
// test_quant_formats.cpp.
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

namespace {

constexpr GgmlType kSubBlockTypes[] = {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                       GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// The Q4_K / Q5_K scales used below: sc = {1, 2, 3, 63, 17, 40, 5, 63},
// m = {0, 4, 8, 1, 33, 2, 63, 16}, packed by hand:
//   bytes 0-3:  sc[0..3] | (sc[4..7] >> 4) << 6  = 1|1<<6, 2|2<<6, 3|0<<6, 63|3<<6
//   bytes 4-7:  m[0..3]  | (m[4..7] >> 4) << 6   = 0|2<<6, 4|0<<6, 8|3<<6, 1|1<<6
//   bytes 8-11: (sc[4..7] & 15) | (m[4..7] & 15) << 4 = 1|1<<4, 8|2<<4, 5|15<<4, 15|0<<4
constexpr uint8_t kKScales[12] = {65, 130, 3, 255, 128, 4, 200, 65, 17, 40, 245, 15};

}  // namespace

TEST_CASE("a hand-built Q4_1 block dequantizes to d * nibble + m", "[kernels][subblock]") {
  // d = 1, m = -1; qs[i] = i | (15 - i) << 4: value i = i - 1, value i + 16 = 14 - i.
  BlockQ4_1 b;
  b.d = kHalfOne;
  b.m = kHalfMinusOne;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const float expected[32] = {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                              14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1};
  const std::vector<float> y = dequantized(GgmlType::Q4_1, &b, 32);
  for (int i = 0; i < 32; ++i) CHECK(y[static_cast<size_t>(i)] == expected[i]);
}

TEST_CASE("a hand-built Q5_0 block takes its 5th bits from qh", "[kernels][subblock]") {
  // d = 2; nibble of value i and of value i + 16 is i; qh = 0xAAAA5555 (little-endian) sets
  // bit i for even i < 16 and odd i >= 16. value = 2 * (nibble + 16 * bit - 16).
  BlockQ5_0 b;
  b.d = kHalfTwo;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | i << 4);
  const uint8_t qh[4] = {0x55, 0x55, 0xAA, 0xAA};
  std::memcpy(b.qh, qh, 4);
  const float expected[32] = {0,   -30, 4,   -26, 8,   -22, 12,  -18, 16, -14, 20, -10, 24, -6, 28, -2,
                              -32, 2,   -28, 6,   -24, 10,  -20, 14,  -16, 18, -12, 22, -8, 26, -4, 30};
  const std::vector<float> y = dequantized(GgmlType::Q5_0, &b, 32);
  for (int i = 0; i < 32; ++i) CHECK(y[static_cast<size_t>(i)] == expected[i]);
}

TEST_CASE("a hand-built Q5_1 block dequantizes to d * q + m", "[kernels][subblock]") {
  // Same quants as the Q5_0 case (q = nibble + 16 * bit) with d = 0.5, m = 1.
  BlockQ5_1 b;
  b.d = kHalfHalf;
  b.m = kHalfOne;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | i << 4);
  const uint8_t qh[4] = {0x55, 0x55, 0xAA, 0xAA};
  std::memcpy(b.qh, qh, 4);
  const std::vector<float> y = dequantized(GgmlType::Q5_1, &b, 32);
  CHECK(y[0] == 9.0f);     // q = 16
  CHECK(y[1] == 1.5f);     // q = 1
  CHECK(y[15] == 8.5f);    // q = 15
  CHECK(y[16] == 1.0f);    // q = 0
  CHECK(y[17] == 9.5f);    // q = 17
  CHECK(y[31] == 16.5f);   // q = 31
}

TEST_CASE("a hand-built Q4_K block unpacks its 6-bit scales and mins", "[kernels][subblock]") {
  // d = 1, dmin = 0.5, every qs byte 0x3A (even sub-blocks q = 10, odd q = 3) except
  // qs[0] = 0x3F (value 0: q = 15) and qs[100] = 0xC1 (byte 96 + 4: value 196 q = 1, 228 q = 12).
  // value = d * sc[s] * q - dmin * m[s].
  BlockQ4_K b;
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  std::memcpy(b.scales, kKScales, 12);
  std::memset(b.qs, 0x3A, sizeof(b.qs));
  b.qs[0] = 0x3F;
  b.qs[100] = 0xC1;
  const float per_sub_block[8] = {10, 4, 26, 188.5f, 153.5f, 119, 18.5f, 181};
  const std::vector<float> y = dequantized(GgmlType::Q4_K, &b, 256);
  for (int s = 0; s < 8; ++s) {
    INFO("sub-block " << s);
    CHECK(y[static_cast<size_t>(32 * s + 1)] == per_sub_block[s]);
    CHECK(y[static_cast<size_t>(32 * s + 31)] == per_sub_block[s]);
  }
  CHECK(y[0] == 15.0f);
  CHECK(y[32] == 4.0f);
  CHECK(y[196] == -26.5f);
  CHECK(y[228] == 748.0f);
}

TEST_CASE("a hand-built Q5_K block adds bit s of qh[l] as the 5th bit", "[kernels][subblock]") {
  // The Q4_K block above (without the two odd bytes) plus qh[5] = 0x81: value 5 (s = 0) has
  // q = 26, value 229 (s = 7) q = 19; everything else as in Q4_K.
  BlockQ5_K b;
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  std::memcpy(b.scales, kKScales, 12);
  std::memset(b.qs, 0x3A, sizeof(b.qs));
  std::memset(b.qh, 0, sizeof(b.qh));
  b.qh[5] = 0x81;
  const float per_sub_block[8] = {10, 4, 26, 188.5f, 153.5f, 119, 18.5f, 181};
  const std::vector<float> y = dequantized(GgmlType::Q5_K, &b, 256);
  for (int s = 0; s < 8; ++s) CHECK(y[static_cast<size_t>(32 * s + 4)] == per_sub_block[s]);
  CHECK(y[5] == 26.0f);
  CHECK(y[229] == 63.0f * 19 - 8);
  CHECK(y[37] == 4.0f);
}

TEST_CASE("a hand-built Q6_K block combines ql, qh and 16 int8 scales", "[kernels][subblock]") {
  // d = 0.5, scales = 1, -2, 3, -4, ..., -16; every ql byte 0x21 (low nibble 1, high 2) and every
  // qh byte 0xE4 (2-bit fields 0, 1, 2, 3), so quarter k has q - 32 = -31, -15, 2, 18.
  // ql[32] = 0 changes value 32 (k = 1: q = 16) and value 96 (k = 3: q = 48).
  // value v = 128h + 32k + l = d * scales[8h + 2k + l / 16] * (q - 32).
  BlockQ6_K b;
  b.d = kHalfHalf;
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i % 2 == 0 ? i + 1 : -(i + 1));
  std::memset(b.ql, 0x21, sizeof(b.ql));
  std::memset(b.qh, 0xE4, sizeof(b.qh));
  b.ql[32] = 0;
  const std::vector<float> y = dequantized(GgmlType::Q6_K, &b, 256);
  CHECK(y[0] == -15.5f);    // scales[0] = 1, -31
  CHECK(y[16] == 31.0f);    // scales[1] = -2, -31
  CHECK(y[33] == -22.5f);   // scales[2] = 3, -15
  CHECK(y[32] == -24.0f);   // scales[2] = 3, q 16 - 32
  CHECK(y[80] == -6.0f);    // scales[5] = -6, 2
  CHECK(y[96] == 56.0f);    // scales[6] = 7, q 48 - 32
  CHECK(y[127] == -72.0f);  // scales[7] = -8, 18
  CHECK(y[128] == -139.5f); // scales[8] = 9, -31
  CHECK(y[160] == -82.5f);  // scales[10] = 11, -15 (h = 1 reads ql[64 + 32], untouched)
  CHECK(y[255] == -144.0f); // scales[15] = -16, 18
}

TEST_CASE("ref sub-block dots stay within the activation rounding of the float dot", "[kernels][subblock]") {
  // Each activation is rounded to the nearest multiple of its block's d, so against the float
  // activations x the dot is off by at most sum_i |deq(w)[i]| * d_i / 2 (plus float noise).
  // The K-quants' act scale covers 256 values instead of 32, so their bound is looser.
  for (GgmlType type : kSubBlockTypes) {
    for (int64_t n : sizes_for(type)) {
      const std::vector<uint8_t> w = quantized(type, random_values(n, 53));
      const std::vector<float> x = random_values(n, 54);
      const std::vector<uint8_t> act = prepared_act(type, x);
      const std::vector<float> wf = dequantized(type, w.data(), n);
      const int64_t block = act_format_for(type) == ActFormat::Q8K ? kQ8KBlockValues : kQ8ActBlockValues;
      double exact = 0.0, bound = 0.0;
      for (int64_t b = 0; b < n / block; ++b) {
        float amax = 0.0f;
        for (int64_t i = b * block; i < (b + 1) * block; ++i) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(i)]));
        for (int64_t i = b * block; i < (b + 1) * block; ++i) {
          exact += static_cast<double>(wf[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
          bound += std::fabs(wf[static_cast<size_t>(i)]) * (amax / 127.0) / 2;
        }
      }
      const double got = ref::vec_dot(type, w.data(), act.data(), n);
      INFO("type " << ggml_type_info(type).name << " n " << n << " exact " << exact << " bound " << bound);
      CHECK(std::fabs(got - exact) <= bound * 1.0001 + 1e-4);
      // random rounding errors cancel: the actual error is far below the worst case
      CHECK(std::fabs(got - exact) < 0.25 * bound);
    }
  }
}

TEST_CASE("SIMD sub-block dots are exact on one block of extreme quants", "[kernels][subblock]") {
  // Every quant at its top (all nibbles and high bits set) against activations of +-127: the
  // integer sums are as large as they get and must not saturate; one block (one scale for
  // Q4_1/Q5_x) leaves no float rounding order to differ.
  std::vector<uint8_t> top(sizeof(BlockQ6_K), 0xFF);
  BlockQ4_1 q4_1;
  BlockQ5_0 q5_0;
  BlockQ5_1 q5_1;
  std::memset(&q4_1, 0xFF, sizeof(q4_1));
  std::memset(&q5_0, 0xFF, sizeof(q5_0));
  std::memset(&q5_1, 0xFF, sizeof(q5_1));
  q4_1.d = q5_0.d = q5_1.d = kHalfOne;
  q4_1.m = q5_1.m = kHalfHalf;
  const BlockQ8Act a = extreme_act_block();
  for_each_simd_isa([&](CpuIsa isa) {
    INFO("isa " << cpu_isa_name(isa));
    CHECK(cpu::vec_dot(GgmlType::Q4_1, &q4_1, &a, 32) == ref::vec_dot(GgmlType::Q4_1, &q4_1, &a, 32));
    CHECK(cpu::vec_dot(GgmlType::Q5_0, &q5_0, &a, 32) == ref::vec_dot(GgmlType::Q5_0, &q5_0, &a, 32));
    CHECK(cpu::vec_dot(GgmlType::Q5_1, &q5_1, &a, 32) == ref::vec_dot(GgmlType::Q5_1, &q5_1, &a, 32));
  });
  // The K-quants against one Q8K super-block of that +-127 pattern, and of all +127 and all -127
  // (4 top quants times 127 in every int32 lane: the largest partial dot, which must stay
  // exact when the AVX-512 path packs it to int16). All quants at their top, sc = m = 15 for
  // Q4_K / Q5_K and unit scales for Q6_K keep every partial sum an integer below 2^24, so any
  // summation order gives the same float.
  BlockQ4_K q4k;
  BlockQ5_K q5k;
  BlockQ6_K q6k;
  std::memcpy(&q4k, top.data(), sizeof(q4k));
  std::memcpy(&q5k, top.data(), sizeof(q5k));
  std::memcpy(&q6k, top.data(), sizeof(q6k));
  const uint8_t scales15[12] = {15, 15, 15, 15, 15, 15, 15, 15, 0xFF, 0xFF, 0xFF, 0xFF};  // sc = m = 15
  std::memcpy(q4k.scales, scales15, 12);
  std::memcpy(q5k.scales, scales15, 12);
  q4k.d = q5k.d = q6k.d = kHalfOne;
  q4k.dmin = q5k.dmin = kHalfHalf;
  for (int8_t& s : q6k.scales) s = 1;
  for (int pattern = 0; pattern < 3; ++pattern) {
    BlockQ8K a8k;
    a8k.d = 1.0f;
    for (int i = 0; i < kQ8KBlockValues; ++i) a8k.qs[i] = pattern == 0 ? a.qs[i % 32] : pattern == 1 ? 127 : -127;
    for (int k = 0; k < 16; ++k) {
      a8k.bsums[k] = 0;
      for (int i = 0; i < 16; ++i) a8k.bsums[k] = static_cast<int16_t>(a8k.bsums[k] + a8k.qs[16 * k + i]);
    }
    for_each_simd_isa([&](CpuIsa isa) {
      INFO("isa " << cpu_isa_name(isa) << " pattern " << pattern);
      CHECK(cpu::vec_dot(GgmlType::Q4_K, &q4k, &a8k, 256) == ref::vec_dot(GgmlType::Q4_K, &q4k, &a8k, 256));
      CHECK(cpu::vec_dot(GgmlType::Q5_K, &q5k, &a8k, 256) == ref::vec_dot(GgmlType::Q5_K, &q5k, &a8k, 256));
      CHECK(cpu::vec_dot(GgmlType::Q6_K, &q6k, &a8k, 256) == ref::vec_dot(GgmlType::Q6_K, &q6k, &a8k, 256));
    });
  }
}
