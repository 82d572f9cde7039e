// The per-element math of the CUDA row kernels (rms_norm, rope, hadamard, swiglu, argmax), as
// __host__ __device__ functions a host compiler also builds, so host tests compare it with
// kernels/ops.h and the greedy sampler on machines without a GPU. The kernels of row_ops.cu
// only add the threads and the reductions around these.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

#ifndef KVDESK_HOST_DEVICE
#define KVDESK_HOST_DEVICE __host__ __device__
#endif

namespace kvdesk::cuda {

// ops::rms_norm's factor from the row's sum of squares (accumulated in double, as there).
KVDESK_HOST_DEVICE inline float rms_scale(double sum_sq, int64_t n, float eps) {
  return 1.0f / sqrtf(float(sum_sq / double(n)) + eps);
}

// ops::swiglu of one value: silu(g) * u.
KVDESK_HOST_DEVICE inline float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// ops::rope_angles' base^(-2/n_rot). The launcher computes it on the host: the device's powf
// may differ from the CPU's in the last bits, and at position 10^5 that moves the angle by
// hundredths of a radian.
inline float rope_theta_scale(const ops::RopeParams& p) { return powf(p.freq_base, -2.0f / float(p.n_rot)); }

// ops::rope_angles' theta of pair i: theta_scale multiplied i times, as ggml does, then the
// scaling and frequency factor: IEEE multiplies and a divide, so equal to the CPU's bit for bit.
KVDESK_HOST_DEVICE inline float rope_theta(int32_t position, const ops::RopeParams& p, float theta_scale, int i) {
  float theta_base = float(position);
  for (int k = 0; k < i; ++k) theta_base *= theta_scale;
  const float factor = p.freq_factors ? p.freq_factors[i] : 1.0f;
  return p.freq_scale * (theta_base / factor);
}

// Offsets in a head of pair i's two values (ops::rope_rotate): adjacent for Normal, halves for Neox.
KVDESK_HOST_DEVICE inline int rope_first(ops::RopeMode mode, int i) { return mode == ops::RopeMode::Normal ? 2 * i : i; }
KVDESK_HOST_DEVICE inline int rope_second(ops::RopeMode mode, int n_rot, int i) {
  return mode == ops::RopeMode::Normal ? 2 * i + 1 : i + n_rot / 2;
}

// (a, b) <- (a cos - b sin, a sin + b cos)
KVDESK_HOST_DEVICE inline void rope_pair(float& a, float& b, float c, float s) {
  const float a0 = a, b0 = b;
  a = a0 * c - b0 * s;
  b = a0 * s + b0 * c;
}

// hadamard_rotate_rows' butterfly over one block of b values (b a power of two; kernels/hadamard.h),
// in the same order and with the same 1/sqrt(b), so a rotated row equals the CPU's bit for bit.
KVDESK_HOST_DEVICE inline void hadamard_block_in_place(float* x, int32_t b) {
  for (int32_t half = 1; half < b; half *= 2) {
    for (int32_t start = 0; start < b; start += 2 * half) {
      for (int32_t i = start; i < start + half; ++i) {
        const float lo = x[i];
        const float hi = x[i + half];
        x[i] = lo + hi;
        x[i + half] = lo - hi;
      }
    }
  }
  const float norm = 1.0f / sqrtf(float(b));
  for (int32_t i = 0; i < b; ++i) x[i] *= norm;
}

// The greedy sampler's pick (Sampler::sample at temperature 0): the first index of the largest
// value; a NaN never wins, except that index 0 stays the pick when logits[0] is NaN.
struct ArgmaxCandidate {
  float value;
  int32_t index;
};

// Whether a beats b under that rule, for reductions in any order (indices differ).
KVDESK_HOST_DEVICE inline bool argmax_better(const ArgmaxCandidate& a, const ArgmaxCandidate& b) {
  if (std::isnan(a.value)) return false;
  if (std::isnan(b.value)) return true;
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

}  // namespace kvdesk::cuda
