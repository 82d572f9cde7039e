// Internal to the scalar quantizers (kernels/quantize*.cpp): the pieces every format's
// quantizer shares. A row is quantized block by block; values and scales are rounded to the
// nearest integer (ties to even) and clamped to the format's range; symmetric formats scale by
// the value of largest magnitude, sign kept, and the fitted ones pick the least-squares scale
// of the best of a few candidate roundings.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/check.h"

namespace kvdesk::ref {

// round(v) (ties to even) clamped to [lo, hi].
inline int clamp_int(float v, int lo, int hi) {
  const int q = static_cast<int>(std::nearbyint(v));
  return q < lo ? lo : q > hi ? hi : q;
}

// The value of largest magnitude among x[count] (the first of equals), its sign kept; 0 for zeros.
inline float signed_extreme(const float* x, int count) {
  float amax = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < count; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  return extreme;
}

// The scale s minimizing sum_j (x[j] - s * q[j])^2, q[j] = level(x[j] * id), over the candidate
// inverse scales id = (base + step * t) / extreme, |t| <= tries (extreme: signed_extreme(x));
// extreme / base when no candidate rounds to a nonzero q, 0 for an all-zero x.
template <class Level>
float fit_scale(const float* x, int count, float base, float step, int tries, Level level) {
  const float extreme = signed_extreme(x, count);
  if (extreme == 0.0f) return 0.0f;
  float best_scale = extreme / base;
  float best_score = 0.0f;  // sumqx^2 / sumq2: the error removed by the least-squares scale
  for (int t = -tries; t <= tries; ++t) {
    const float id = (base + step * static_cast<float>(t)) / extreme;
    float sumqx = 0.0f;
    float sumq2 = 0.0f;
    for (int j = 0; j < count; ++j) {
      const float q = level(x[j] * id);
      sumqx += q * x[j];
      sumq2 += q * q;
    }
    if (sumq2 > 0.0f && sumqx * sumqx > best_score * sumq2) {
      best_score = sumqx * sumqx / sumq2;
      best_scale = sumqx / sumq2;
    }
  }
  return best_scale;
}

// y[n / kBlockValues] from x[n], one quantize_block(x, y[b]) per block; n a whole number of blocks.
template <int kBlockValues, class Block, class QuantizeBlock>
void quantize_blocks(const float* x, Block* y, int64_t n, QuantizeBlock quantize_block) {
  KVDESK_ASSERT(n % kBlockValues == 0);
  for (int64_t b = 0; b < n / kBlockValues; ++b) quantize_block(x + b * kBlockValues, y[b]);
}

}  // namespace kvdesk::ref
