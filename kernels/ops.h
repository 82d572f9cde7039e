// Element-wise and per-row operations of a Llama-style forward pass. Each is a plain loop; they
// cost little next to the matmuls and attention, so each is its own reference, except the gated
// activations, whose exp or tanh per value is a library call: kernels/gated_activation.h runs
// them at vector width, with swiglu and geglu_tanh here as its scalar twins.
#pragma once
#include <cstdint>

namespace kvdesk::ops {

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i in [0, n). y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary position embedding (ggml's rope_ext). Each rotated pair i of a head, i in
// [0, n_rot/2), turns by the angle
//   theta_i = position * freq_scale * base^(-2i / n_rot) / freq_factors[i]
// (freq_factors: Llama 3's per-pair rope_freqs; all 1 when absent), or with YaRN by a mix of
// that scaled angle and the unscaled one (RopeParams::ext_factor). Which dimensions form pair i
// depends on how the model was trained:
enum class RopeMode {
  Normal,  // adjacent pairs (x[2i], x[2i+1]): Llama as llama.cpp converts it
  Neox,    // halves (x[i], x[i + n_rot/2]): GPT-NeoX, Qwen2
};

// The rotary embedding of one model. Dimensions at and past n_rot stay as they are (partial
// rotary).
struct RopeParams {
  int n_rot = 0;                          // even, at most the head dimension; 0: nothing rotates
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;                // 1 / linear scaling factor
  const float* freq_factors = nullptr;    // [n_rot/2] or null
  RopeMode mode = RopeMode::Normal;
  float attn_factor = 1.0f;               // multiplies cos and sin (LongRoPE's attention factor)
  // YaRN (ggml's rope_yarn), on when ext_factor != 0: pair i turns by
  //   theta_i = scaled_i * (1 - mix_i) + unscaled_i * mix_i,
  //   mix_i = ext_factor * (1 - clamp((i - yarn_low) / max(0.001, yarn_high - yarn_low), 0, 1)),
  // so the fast pairs below yarn_low keep their trained angles and the slow ones past yarn_high
  // are fully interpolated; cos and sin then also grow by 1 + 0.1 ln(1 / freq_scale).
  float ext_factor = 0.0f;
  float yarn_low = 0.0f;                  // pair index (yarn_correction_range)
  float yarn_high = 0.0f;
};

// YaRN's correction range as ggml_rope_yarn_corr_dims computes it: the pairs that turn
// beta_fast and beta_slow times over original_context positions, floored and ceiled, within
// [0, n_rot - 1].
struct YarnRange {
  float low;
  float high;
};
YarnRange yarn_correction_range(int n_rot, int32_t original_context, float freq_base, float beta_fast,
                                float beta_slow);

// The angles of one position, shared by all heads of a token: cos_sin[2i] = attn_factor *
// cos(theta_i), cos_sin[2i+1] = attn_factor * sin(theta_i). base^(-2i/n_rot) is built by
// repeated multiplication, as ggml does, so results match llama.cpp bit for bit when freq_factors are absent.
void rope_angles(int32_t position, const RopeParams& p, float* cos_sin /* [n_rot] */);

// Rotates one head in place: (a, b) <- (a cos - b sin, a sin + b cos) for each pair (a, b).
void rope_rotate(float* x, const float* cos_sin /* [n_rot] */, int n_rot, RopeMode mode);

// h[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g).
void swiglu(const float* gate, const float* up, float* h, int64_t n);

// h[i] = gelu(gate[i]) * up[i] with GELU's tanh approximation,
// gelu(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
void geglu_tanh(const float* gate, const float* up, float* h, int64_t n);

// gpt-oss's clamped SwiGLU (ggml's swiglu_oai): with g = min(gate[i], limit) and
// u = clamp(up[i], -limit, limit), h[i] = g * sigmoid(alpha g) * (u + 1), alpha = 1.702, limit 7.
constexpr float kSwigluOaiAlpha = 1.702f;
constexpr float kSwigluOaiLimit = 7.0f;
void swiglu_oai(const float* gate, const float* up, float* h, int64_t n);

// Soft-capping in place: x[i] = cap * tanh(x[i] / cap), cap > 0.
void softcap(float* x, int64_t n, float cap);

// y[i] *= a
void scale_in_place(float* y, float a, int64_t n);

// y[i] += x[i]
void add_in_place(float* y, const float* x, int64_t n);

// y[i] += a * x[i]
void add_scaled_in_place(float* y, const float* x, float a, int64_t n);

// In place: x[i] = e^(x[i] - max) / sum; returns nothing. n >= 1.
void softmax(float* x, int64_t n);

}  // namespace kvdesk::ops
