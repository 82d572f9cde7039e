// cpu:: gated activations: the AVX2 kernel on any CPU that has it, else the scalar twins.
#include "kernels/gated_activation.h"

#include "kernels/cpu/gated_activation_avx2.h"
#include "kernels/dot.h"
#include "kernels/ops.h"

namespace kvdesk::cpu {

void swiglu(const float* gate, const float* up, float* h, int64_t n) {
  if (cpu_isa_active() == CpuIsa::Scalar) return ops::swiglu(gate, up, h, n);
  swiglu_avx2(gate, up, h, n);
}

void swiglu_oai(const float* gate, const float* up, float* h, int64_t n) {
  if (cpu_isa_active() == CpuIsa::Scalar) return ops::swiglu_oai(gate, up, h, n);
  swiglu_oai_avx2(gate, up, h, n);
}

void geglu_tanh(const float* gate, const float* up, float* h, int64_t n) {
  if (cpu_isa_active() == CpuIsa::Scalar) return ops::geglu_tanh(gate, up, h, n);
  geglu_tanh_avx2(gate, up, h, n);
}

}  // namespace kvdesk::cpu
