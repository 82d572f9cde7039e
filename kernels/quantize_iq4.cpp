// Scalar quantizers and dequantizers for the non-linear 4-bit formats IQ4_NL and IQ4_XS
// (layouts and the level table in ggml_types.h). Each 32-value group is fitted as ggml's
// reference does: a few candidate scales around (extreme value) / -127, every value mapped to
// its nearest table level, and the least-squares scale of the best mapping kept. IQ4_XS then
// quantizes its 8 group scales to 6 bits against the super-block's largest, and every value is
// mapped again against the scale the file will actually hold.
#include <cmath>
#include <cstring>

#include "kernels/check.h"
#include "kernels/fp16.h"
#include "kernels/quant_unpack.h"
#include "kernels/quantize_common.h"
#include "kernels/quantize.h"

namespace kvdesk::ref {
namespace {

constexpr int kGroup = 32;       // values per scale (IQ4_NL block, IQ4_XS sub-block)
constexpr int kSubBlocks = kQK_K / kGroup;
constexpr int kTryRadius = 4;    // candidate inverse scales (-127 + t) / extreme, |t| <= radius

// Midpoints between neighbouring levels of kIq4nlValues: [15]
constexpr float kLevelMid[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
                                 7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f};

// Index of the table level nearest to v (binary search over the midpoints, without branches:
// on real weights each comparison is a coin toss a branch predictor loses).
int nearest_level(float v) {
  int i = 0;
  for (int step = 8; step > 0; step /= 2) i += static_cast<int>(v > kLevelMid[i + step - 1]) * step;
  return i;
}

// The least-squares scale of group x[32] over its nearest table levels at the candidate inverse
// scales (-127 + t) / extreme; 0 for zeros.
float fit_group_scale(const float* x) {
  return fit_scale(x, kGroup, kIq4nlValues[0], 1.0f, kTryRadius,
                   [](float v) { return static_cast<float>(kIq4nlValues[nearest_level(v)]); });
}

// 32 values against `scale` -> 16 index bytes (values 0..15 low nibbles, 16..31 high).
void pack_group(const float* x, float scale, uint8_t* qs) {
  const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < kGroup / 2; ++j) {
    qs[j] = static_cast<uint8_t>(nearest_level(x[j] * id) | nearest_level(x[j + kGroup / 2] * id) << 4);
  }
}

void quantize_block_iq4_nl(const float* x, BlockIQ4_NL& y) {
  y.d = fp32_to_fp16(fit_group_scale(x));
  pack_group(x, fp16_to_fp32(y.d), y.qs);
}

// Group scales s[8] -> d = (the largest, sign kept) / -32 and 6-bit ls = round(s / d) + 32.
void quantize_block_iq4_xs(const float* x, BlockIQ4_XS& y) {
  float scale[kSubBlocks];
  for (int s = 0; s < kSubBlocks; ++s) scale[s] = fit_group_scale(x + kGroup * s);
  y.d = fp32_to_fp16(signed_extreme(scale, kSubBlocks) / -32.0f);
  const float d = fp16_to_fp32(y.d);
  y.scales_h = 0;
  std::memset(y.scales_l, 0, sizeof(y.scales_l));
  for (int s = 0; s < kSubBlocks; ++s) {
    const int ls = steps_of(scale[s], d, -32, 31) + 32;
    y.scales_l[s / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (s % 2)));
    y.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * s));
    pack_group(x + kGroup * s, d * (ls - 32), y.qs + 16 * s);
  }
}

}  // namespace

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n) {
  quantize_blocks<kIq4nlBlockValues>(x, y, n, quantize_block_iq4_nl);
}

void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n) {
  quantize_blocks<kQK_K>(x, y, n, quantize_block_iq4_xs);
}

// y = d * level
void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kIq4nlBlockValues; ++b) {
    int q[kGroup];
    unpack_iq4(x[b].qs, q);
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < kGroup; ++j) y[b * kGroup + j] = d * q[j];
  }
}

// y = d * (ls[s] - 32) * level for value 32s + l
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int s = 0; s < kSubBlocks; ++s) {
      int q[kGroup];
      unpack_iq4(x[b].qs + 16 * s, q);
      const float dl = d * (iq4_xs_scale(x[b], s) - 32);
      for (int j = 0; j < kGroup; ++j) y[b * kQK_K + kGroup * s + j] = dl * q[j];
    }
  }
}

}  // namespace kvdesk::ref
