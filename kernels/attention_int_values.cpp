// The weight quantizer of the integer values (attention_int_values.h), shared by the scalar twin.
#include "kernels/attention_int_values.h"

#include <cmath>

namespace kvdesk {

float quantize_value_weights(const float* w, int32_t n, int32_t code_max, uint8_t* k) {
  float wmax = 0;
  for (int32_t r = 0; r < n; ++r) wmax = w[r] > wmax ? w[r] : wmax;
  const float inverse = wmax > 0 ? float(code_max) / wmax : 0.0f;
  for (int32_t r = 0; r < n; ++r) k[r] = uint8_t(std::nearbyint(w[r] * inverse));
  return wmax / float(code_max);
}

}  // namespace kvdesk
