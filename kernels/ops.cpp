// Row operations of the forward pass (see ops.h for the formulas).
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

namespace kvdesk::ops {
namespace {

// The sum of squares in double (as ggml), over kLanes interleaved partial sums: one chain of
// dependent double adds takes its latency per value (1.5 us for a 2048-wide row, and every
// layer norms twice per token), independent chains overlap (0.5 us).
double sum_of_squares(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += double(x[i + k]) * x[i + k];
  }
  double sum = 0;
  for (; i < n; ++i) sum += double(x[i]) * x[i];
  for (const double lane : lanes) sum += lane;
  return sum;
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const double sum_sq = sum_of_squares(x, n);
  const float scale = 1.0f / std::sqrt(float(sum_sq / double(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

namespace {

// ggml's rope_yarn_ramp: 1 for pairs below low, 0 past high, linear between.
float yarn_ramp(float low, float high, int i) {
  const float y = (float(i) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

// Pairs that turn `rotations` times over original_context positions (ggml_rope_yarn_corr_dim).
float yarn_pair_for_rotations(int n_rot, int32_t original_context, float rotations, float freq_base) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  return float(n_rot) * std::log(float(original_context) / (rotations * kTwoPi)) / (2.0f * std::log(freq_base));
}

}  // namespace

YarnRange yarn_correction_range(int n_rot, int32_t original_context, float freq_base, float beta_fast,
                                float beta_slow) {
  const float low = std::floor(yarn_pair_for_rotations(n_rot, original_context, beta_fast, freq_base));
  const float high = std::ceil(yarn_pair_for_rotations(n_rot, original_context, beta_slow, freq_base));
  return YarnRange{std::max(0.0f, low), std::min(float(n_rot - 1), high)};
}

void rope_angles(int32_t position, const RopeParams& p, float* cos_sin) {
  if (p.n_rot <= 0) return;
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
  const bool yarn = p.ext_factor != 0.0f;
  const float mscale = p.attn_factor * (yarn ? 1.0f + 0.1f * std::log(1.0f / p.freq_scale) : 1.0f);
  float theta_base = float(position);
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float factor = p.freq_factors ? p.freq_factors[i] : 1.0f;
    const float unscaled = theta_base / factor;
    float theta = p.freq_scale * unscaled;
    if (yarn) {
      const float mix = yarn_ramp(p.yarn_low, p.yarn_high, i) * p.ext_factor;
      theta = theta * (1.0f - mix) + unscaled * mix;
    }
    cos_sin[2 * i] = std::cos(theta) * mscale;
    cos_sin[2 * i + 1] = std::sin(theta) * mscale;
    theta_base *= theta_scale;
  }
}

void rope_rotate(float* x, const float* cos_sin, int n_rot, RopeMode mode) {
  const int half = n_rot / 2;
  // Pair i is (x[i * first_step], x[i * first_step + second_offset]).
  const int first_step = mode == RopeMode::Normal ? 2 : 1;
  const int second_offset = mode == RopeMode::Normal ? 1 : half;
  for (int i = 0; i < half; ++i) {
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    float& a = x[i * first_step];
    float& b = x[i * first_step + second_offset];
    const float a0 = a;
    const float b0 = b;
    a = a0 * c - b0 * s;
    b = a0 * s + b0 * c;
  }
}

void swiglu(const float* gate, const float* up, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    h[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void swiglu_oai(const float* gate, const float* up, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kSwigluOaiLimit);
    const float u = std::clamp(up[i], -kSwigluOaiLimit, kSwigluOaiLimit);
    h[i] = g / (1.0f + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
  }
}

void geglu_tanh(const float* gate, const float* up, float* h, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    h[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void scale_in_place(float* y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

void add_in_place(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void add_scaled_in_place(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
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
