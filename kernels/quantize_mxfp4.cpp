// Scalar quantizer and dequantizer for MXFP4 (layout and level table in ggml_types.h), rounding
// as ggml's reference quantizer does: the block's exponent is floor(log2(max |x|)) - 2, so
// the largest level (12, a doubled 6) times the halved scale covers values up to 1.5x that power
// of two (larger ones clip to it), and each value takes the level nearest to it, the lower
// index on a tie.
#include <algorithm>
#include <cmath>

#include "kernels/quant_unpack.h"
#include "kernels/quantize_common.h"
#include "kernels/quantize.h"

namespace kvdesk::ref {
namespace {

int nearest_mxfp4_index(float x, float scale) {
  int best = 0;
  float best_error = std::fabs(kMxfp4Values[0] * scale - x);
  for (int i = 1; i < 16; ++i) {
    const float error = std::fabs(kMxfp4Values[i] * scale - x);
    if (error < best_error) {
      best = i;
      best_error = error;
    }
  }
  return best;
}

void quantize_block_mxfp4(const float* x, BlockMXFP4& y) {
  float amax = 0.0f;
  for (int j = 0; j < kMxfp4BlockValues; ++j) amax = std::max(amax, std::fabs(x[j]));
  // Clamped where ggml's cast would wrap: magnitudes below 2^-125 or above 2^128 do not occur in
  // weights.
  y.e = amax > 0.0f ? static_cast<uint8_t>(std::clamp(std::floor(std::log2(amax)) - 2 + 127, 0.0f, 254.0f)) : 0;
  const float scale = mxfp4_scale(y.e);
  constexpr int kHalf = kMxfp4BlockValues / 2;
  for (int j = 0; j < kHalf; ++j) {
    y.qs[j] = static_cast<uint8_t>(nearest_mxfp4_index(x[j], scale) | nearest_mxfp4_index(x[j + kHalf], scale) << 4);
  }
}

}  // namespace

void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t n) {
  quantize_blocks<kMxfp4BlockValues>(x, y, n, quantize_block_mxfp4);
}

// y = 2^(e - 128) * level
void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kMxfp4BlockValues; ++b) {
    int q[kMxfp4BlockValues];
    unpack_levels(kMxfp4Values, x[b].qs, q);
    const float scale = mxfp4_scale(x[b].e);
    for (int j = 0; j < kMxfp4BlockValues; ++j) y[b * kMxfp4BlockValues + j] = scale * q[j];
  }
}

}  // namespace kvdesk::ref
