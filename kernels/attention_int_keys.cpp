// The query quantizer of the integer key scores and their scalar twin (attention_int_keys.h).
#include "kernels/attention_int_keys.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/kv_quant.h"

namespace kvdesk {

float quantize_query(const float* q, int32_t head_dim, int32_t pair_max, int16_t* c) {
  // Comparisons, not std::fmax (a libm call per value); a NaN q[i] is skipped either way.
  float amax = 0, pair_amax = 0;
  for (int32_t i = 0; i < head_dim; ++i) amax = std::fabs(q[i]) > amax ? std::fabs(q[i]) : amax;
  for (int32_t i = 0; pair_max > 0 && i + 1 < head_dim; i += 2) {
    const float pair = std::fabs(q[i]) + std::fabs(q[i + 1]);
    pair_amax = pair > pair_amax ? pair : pair_amax;
  }
  // A pair's codes round up by less than 1 in sum, so pairs at most pair_max - 1 before rounding.
  const float top = std::max(amax, pair_max > 0 ? pair_amax * float(kQueryCodeMax) / float(pair_max - 1) : 0.0f);
  const float scale = top / float(kQueryCodeMax);
  const float inverse = top > 0 ? float(kQueryCodeMax) / top : 0.0f;
  // Nearest, halves away from zero, by a truncating conversion (no libm call per value);
  // |q * inverse| <= kQueryCodeMax, up to the rounding of inverse.
  for (int32_t i = 0; i < head_dim; ++i) {
    const float x = q[i] * inverse;
    const int32_t code = int32_t(x + (x < 0 ? -0.5f : 0.5f));
    c[i] = int16_t(std::clamp(code, -kQueryCodeMax, kQueryCodeMax));
  }
  return scale;
}

namespace ref {

namespace {

// Code of dim i of an int8 / int4 row's values.
int32_t key_code(KvType k_type, const uint8_t* values, int32_t i) {
  if (k_type == KvType::INT8) return values[i];
  return (values[i / 2] >> (4 * (i % 2))) & 15;
}

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return fp16_to_fp32(h);
}

}  // namespace

float int_key_dot(KvType k_type, const uint8_t* row, const int16_t* c, int32_t head_dim) {
  const int32_t group = kv_row_group(k_type, head_dim);
  const uint8_t* values = row + kv_row_values_offset(k_type, head_dim);
  float total = 0;
  const int32_t groups = kv_row_scales(k_type, head_dim);
  for (int32_t g = 0; g < groups; ++g) {
    int32_t dot = 0, sum = 0;
    const int32_t end = kv_group_end(k_type, head_dim, g);
    for (int32_t i = g * group; i < end; ++i) {
      dot += c[i] * key_code(k_type, values, i);
      sum += c[i];
    }
    const float s = f16_at(row + 4 * g), m = f16_at(row + 4 * g + 2);
    total = std::fma(m, float(sum), std::fma(s, float(dot), total));
  }
  return total;
}

}  // namespace ref
}  // namespace kvdesk
