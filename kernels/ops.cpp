// Row operations of the forward pass (see ops.h for the formulas).
#include "kernels/ops.h"

#include <cmath>

namespace kvdesk::ops {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += double(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(float(sum_sq / double(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void rope_normal(float* x, int32_t position, int n_rot, float freq_base, float freq_scale) {
  const float theta_scale = std::pow(freq_base, -2.0f / float(n_rot));
  float theta = float(position) * freq_scale;
  for (int i = 0; i < n_rot; i += 2) {
    const float c = std::cos(theta);
    const float s = std::sin(theta);
    const float x0 = x[i];
    const float x1 = x[i + 1];
    x[i] = x0 * c - x1 * s;
    x[i + 1] = x0 * s + x1 * c;
    theta *= theta_scale;
  }
}

void swiglu(const float* gate, const float* up, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    h[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_in_place(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softmax(float* x, int64_t n) {
  float max_value = x[0];
  for (int64_t i = 1; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace kvdesk::ops
