// Row builders the quantized-format kernel tests share: normal random values, and rows
// quantized, dequantized or prepared as activations with the ref:: kernels, so every test
// compares against the same scalar truth; and the error measure of a matmul's output against it.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/dot.h"
#include "kernels/ggml_types.h"
#include "kernels/quantize.h"

namespace kvdesk::test {

constexpr uint16_t kHalfOne = 0x3C00;       // 1.0
constexpr uint16_t kHalfTwo = 0x4000;       // 2.0
constexpr uint16_t kHalfHalf = 0x3800;      // 0.5
constexpr uint16_t kHalfMinusOne = 0xBC00;  // -1.0

// [n] values drawn from N(0, 1), the same for the same seed.
inline std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

// One row of `type` holding x, from ref::quantize_row.
inline std::vector<uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> w(ggml_row_bytes(type, static_cast<int64_t>(x.size())));
  ref::quantize_row(type, x.data(), w.data(), static_cast<int64_t>(x.size()));
  return w;
}

// [n] floats of a row of `type`, from ref::dequantize_row.
inline std::vector<float> dequantized(GgmlType type, const void* row, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  ref::dequantize_row(type, row, y.data(), n);
  return y;
}

// x as the activation row a dot against `type` weights reads, from ref::prepare_act_row.
inline std::vector<uint8_t> prepared_act(GgmlType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> act(act_row_bytes(type, n));
  ref::prepare_act_row(type, x.data(), act.data(), n);
  return act;
}

// Row lengths with odd block counts: 1, 3 and 129 blocks of 32, or 1, 3 and 17 of 256.
inline std::vector<int64_t> sizes_for(GgmlType type) {
  if (ggml_type_info(type).block_values == kQK_K) return {256, 768, 4352};
  return {32, 96, 4128};
}

// sum and low_sum of a hand-built act block from its qs.
inline void set_act_sums(BlockQ8Act& a) {
  int32_t sum = 0, low_sum = 0;
  for (int i = 0; i < kQ8ActBlockValues; ++i) (i < kQ8ActLowValues ? low_sum : sum) += a.qs[i];
  a.low_sum = static_cast<int16_t>(low_sum);
  a.sum = static_cast<int16_t>(low_sum + sum);
}

// An act block of unit scale and quants -127, 127, 127, -127, ... (-127 at every third value):
// the largest integer sums a dot against it can reach.
inline BlockQ8Act extreme_act_block() {
  BlockQ8Act a;
  a.d = 1.0f;
  for (int i = 0; i < kQ8ActBlockValues; ++i) a.qs[i] = static_cast<int8_t>(i % 3 ? 127 : -127);
  set_act_sums(a);
  return a;
}

// Relative squared error of got against want ([batch][ld_y] matmul outputs) over rows
// [row_begin, row_end); the other entries must be untouched (NaN).
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want, int64_t batch,
                             int64_t ld_y, int64_t row_begin, int64_t row_end) {
  double err = 0.0, ref = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t r = 0; r < ld_y; ++r) {
      const size_t i = static_cast<size_t>(b * ld_y + r);
      if (r < row_begin || r >= row_end) {
        CHECK(std::isnan(got[i]));
        continue;
      }
      err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      ref += double(want[i]) * want[i];
    }
  }
  return err / ref;
}

}  // namespace kvdesk::test
