// Run-time ISA choice for cpu::: detects the widest usable ISA once, routes every call through
// that ISA's kernel table, and lets tests pin a narrower one.
#include <cpuid.h>

#include <atomic>

#include "kernels/cpu/dot_isa.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"

namespace kvdesk {
namespace {

const IsaKernels kScalarKernels = {&ref::prepare_act_row, &ref::vec_dot, &ref::matmul_rows};

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

CpuIsa detect_isa() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vnni");
  if (avx2 && avx512) return CpuIsa::Avx512;
  return avx2 ? CpuIsa::Avx2 : CpuIsa::Scalar;
}

std::atomic<CpuIsa>& active_isa() {
  static std::atomic<CpuIsa> isa{cpu_isa_detected()};
  return isa;
}

const IsaKernels& kernels_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return kAvx512Kernels;
    case CpuIsa::Avx2: return kAvx2Kernels;
    case CpuIsa::Scalar: break;
  }
  return kScalarKernels;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512-vnni";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Scalar: break;
  }
  return "scalar";
}

CpuIsa cpu_isa_detected() {
  static const CpuIsa detected = detect_isa();
  return detected;
}

bool cpu_isa_supported(CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(cpu_isa_detected()); }

std::optional<CpuIsa> cpu_isa_from_name(std::string_view name) {
  if (name == "auto") return cpu_isa_detected();
  if (name == "avx2") return CpuIsa::Avx2;
  if (name == "avx512" || name == "avx512-vnni") return CpuIsa::Avx512;
  if (name == "ref" || name == "scalar") return CpuIsa::Scalar;
  return std::nullopt;
}

CpuIsa cpu_isa_active() { return active_isa().load(std::memory_order_relaxed); }

void cpu_isa_force(CpuIsa isa) {
  const CpuIsa best = cpu_isa_detected();
  active_isa().store(static_cast<int>(isa) < static_cast<int>(best) ? isa : best,
                     std::memory_order_relaxed);
}

const IsaKernels& cpu_isa_kernels() { return kernels_for(cpu_isa_active()); }

namespace cpu {

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  cpu_isa_kernels().prepare_act_row(weight_type, x, act, n);
}

float vec_dot(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n) {
  return cpu_isa_kernels().vec_dot(weight_type, w_row, act_row, n);
}

}  // namespace cpu
}  // namespace kvdesk
