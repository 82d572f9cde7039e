// Element-wise and per-row operations of a Llama-style forward pass. Each is a plain loop the
// compiler vectorizes; they cost little next to the matmuls and attention, so each is its
// own reference (no separate SIMD twin).
#pragma once
#include <cstdint>

namespace kvdesk::ops {

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i in [0, n). y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary position embedding, ggml "normal" mode (adjacent pairs), in place on one head:
//   for i in [0, n_rot/2): theta = position * freq_scale * base^(-2i / n_rot)
//   (x[2i], x[2i+1]) <- (x[2i] cos - x[2i+1] sin, x[2i] sin + x[2i+1] cos)
// Dimensions at and past n_rot are left as they are (partial rotary).
void rope_normal(float* x, int32_t position, int n_rot, float freq_base, float freq_scale);

// h[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g).
void swiglu(const float* gate, const float* up, float* h, int64_t n);

// y[i] += x[i]
void add_in_place(float* y, const float* x, int64_t n);

// In place: x[i] = e^(x[i] - max) / sum; returns nothing. n >= 1.
void softmax(float* x, int64_t n);

}  // namespace kvdesk::ops
