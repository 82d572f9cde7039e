// Internal: the AVX2 gated activations kernels/gated_activation.cpp dispatches to
// (kernels/cpu/gated_activation_avx2.cpp, built with AVX2 flags, called only after the CPU check).
#pragma once
#include <cstdint>

namespace kvdesk {

void swiglu_avx2(const float* gate, const float* up, float* h, int64_t n);
void geglu_tanh_avx2(const float* gate, const float* up, float* h, int64_t n);
void swiglu_oai_avx2(const float* gate, const float* up, float* h, int64_t n);

}  // namespace kvdesk
