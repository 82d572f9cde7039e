// The gated FFN activations at vector width: h[i] = act(gate[i]) * up[i] for SiLU (SwiGLU), GELU's
// tanh form (GeGLU) and gpt-oss's clamped SwiGLU, over whole rows. ops::swiglu, ops::geglu_tanh
// and ops::swiglu_oai are their scalar twins; these run the AVX2 kernel wherever the CPU has one
// (AVX-512 machines too: the pass is short next to the matmuls around it) and the twins on the
// scalar path. Both activations are a sigmoid gate, act(g) = g * sigmoid(z): SiLU z = g, GELU-tanh
// z = 2 sqrt(2/pi) (g + 0.044715 g^3), since (1 + tanh(y)) / 2 = sigmoid(2y). The vector SiLU
// agrees with its twin within a few ulp; the GELU within about |z| ulp (z's own float rounding,
// which e^-z turns into a relative error), where the scalar twin loses more: its 1 + tanh(y)
// cancels for g below about -3, which the sigmoid form never does.
#pragma once
#include <cstdint>

namespace kvdesk::cpu {

// h[i] = silu(gate[i]) * up[i] for i in [0, n) (nothing when n <= 0); h may alias gate or up.
void swiglu(const float* gate, const float* up, float* h, int64_t n);

// h[i] = gelu_tanh(gate[i]) * up[i], the same way.
void geglu_tanh(const float* gate, const float* up, float* h, int64_t n);

// gpt-oss's clamped SwiGLU (ops::swiglu_oai), the same way.
void swiglu_oai(const float* gate, const float* up, float* h, int64_t n);

}  // namespace kvdesk::cpu
