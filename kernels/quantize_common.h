// Internal to the scalar quantizers (kernels/quantize*.cpp): the pieces every format's
// quantizer shares. A row is quantized block by block; values and scales are rounded to the
// nearest integer (ties to even) and clamped to the format's range; symmetric formats scale by
// the value of largest magnitude, sign kept, the fitted ones pick the least-squares scale of
// the best of a few candidate roundings, and the affine K-quants span each sub-block's range.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/check.h"
#include "kernels/fp16.h"

namespace kvdesk::ref {

// round(v) (ties to even) clamped to [lo, hi].
inline int clamp_int(float v, int lo, int hi) {
  const int q = static_cast<int>(std::nearbyint(v));
  return q < lo ? lo : q > hi ? hi : q;
}

// v in units of step, rounded and clamped to [lo, hi] (lo <= 0 <= hi); 0 for a zero step.
inline int steps_of(float v, float step, int lo, int hi) { return step != 0.0f ? clamp_int(v / step, lo, hi) : 0; }

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

// Affine sub-blocks of one super-block (Q2_K, Q4_K, Q5_K): sub-block s of x[kSubBlocks *
// kSubValues] spans [lo, hi] with lo = min(0, min x) and value ~= d * sc[s] * q - dmin * m[s],
// q in [0, levels). Its step (hi - lo) / (levels - 1) and offset -lo are rounded to sc[s], m[s]
// in [0, scale_max] against the largest (d = max step / scale_max, dmin = max offset /
// scale_max, both fp16), and every value against the scale the file will actually hold.
// Writes d, dmin, sc[kSubBlocks], m[kSubBlocks] and q[kSubBlocks * kSubValues] (value order).
template <int kSubBlocks, int kSubValues>
void quantize_affine_sub_blocks(const float* x, int levels, int scale_max, uint16_t& d_out, uint16_t& dmin_out,
                                int* sc, int* m, int* q) {
  float step[kSubBlocks];    // [kSubBlocks] (hi - lo) / (levels - 1)
  float offset[kSubBlocks];  // [kSubBlocks] -lo >= 0
  float max_step = 0.0f;
  float max_offset = 0.0f;
  for (int s = 0; s < kSubBlocks; ++s) {
    float lo = 0.0f;
    float hi = x[kSubValues * s];
    for (int l = 0; l < kSubValues; ++l) {
      lo = std::fmin(lo, x[kSubValues * s + l]);
      hi = std::fmax(hi, x[kSubValues * s + l]);
    }
    step[s] = (hi - lo) / static_cast<float>(levels - 1);
    offset[s] = -lo;
    max_step = std::fmax(max_step, step[s]);
    max_offset = std::fmax(max_offset, offset[s]);
  }
  d_out = fp32_to_fp16(max_step / static_cast<float>(scale_max));
  dmin_out = fp32_to_fp16(max_offset / static_cast<float>(scale_max));
  const float d = fp16_to_fp32(d_out);
  const float dmin = fp16_to_fp32(dmin_out);
  for (int s = 0; s < kSubBlocks; ++s) {
    sc[s] = d > 0.0f ? clamp_int(step[s] / d, 0, scale_max) : 0;
    m[s] = dmin > 0.0f ? clamp_int(offset[s] / dmin, 0, scale_max) : 0;
    const float scale = d * sc[s];
    const float shift = dmin * m[s];
    for (int l = 0; l < kSubValues; ++l) {
      const int i = kSubValues * s + l;
      q[i] = scale > 0.0f ? clamp_int((x[i] + shift) / scale, 0, levels - 1) : 0;
    }
  }
}

// y[n / kBlockValues] from x[n], one quantize_block(x, y[b]) per block; n a whole number of blocks.
template <int kBlockValues, class Block, class QuantizeBlock>
void quantize_blocks(const float* x, Block* y, int64_t n, QuantizeBlock quantize_block) {
  KVDESK_ASSERT(n % kBlockValues == 0);
  for (int64_t b = 0; b < n / kBlockValues; ++b) quantize_block(x + b * kBlockValues, y[b]);
}

}  // namespace kvdesk::ref
