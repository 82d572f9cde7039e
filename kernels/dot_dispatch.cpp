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

// AVX-VNNI from CPUID leaf 7 subleaf 1 (EAX bit 4), read directly as F16C is. It works on the
// ymm registers, whose saving by the OS (XGETBV) the AVX2 check has confirmed, so the bit alone
// decides.
bool has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
}

// What this CPU runs, ISA by ISA.
struct IsaSupport {
  bool avx2 = false;
  bool avx_vnni = false;
  bool avx512 = false;
};

IsaSupport detect_support() {
  __builtin_cpu_init();
  IsaSupport s;
  s.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  s.avx_vnni = s.avx2 && has_avx_vnni();
  s.avx512 = s.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
  return s;
}

const IsaSupport& support() {
  static const IsaSupport s = detect_support();
  return s;
}

// The next narrower ISA, where a forced one the CPU lacks falls to.
CpuIsa narrower(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return CpuIsa::AvxVnni;
    case CpuIsa::AvxVnni: return CpuIsa::Avx2;
    case CpuIsa::Avx2:
    case CpuIsa::Scalar: break;
  }
  return CpuIsa::Scalar;
}

std::atomic<CpuIsa>& active_isa() {
  static std::atomic<CpuIsa> isa{cpu_isa_detected()};
  return isa;
}

const IsaKernels& kernels_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return kAvx512Kernels;
    case CpuIsa::AvxVnni: return kAvxVnniKernels;
    case CpuIsa::Avx2: return kAvx2Kernels;
    case CpuIsa::Scalar: break;
  }
  return kScalarKernels;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512-vnni";
    case CpuIsa::AvxVnni: return "avxvnni";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Scalar: break;
  }
  return "scalar";
}

CpuIsa cpu_isa_detected() {
  const IsaSupport& s = support();
  if (s.avx512) return CpuIsa::Avx512;
  if (s.avx_vnni) return CpuIsa::AvxVnni;
  return s.avx2 ? CpuIsa::Avx2 : CpuIsa::Scalar;
}

bool cpu_isa_supported(CpuIsa isa) {
  const IsaSupport& s = support();
  switch (isa) {
    case CpuIsa::Avx512: return s.avx512;
    case CpuIsa::AvxVnni: return s.avx_vnni;
    case CpuIsa::Avx2: return s.avx2;
    case CpuIsa::Scalar: break;
  }
  return true;
}

std::optional<CpuIsa> cpu_isa_from_name(std::string_view name) {
  if (name == "auto") return cpu_isa_detected();
  if (name == "avx2") return CpuIsa::Avx2;
  if (name == "avxvnni" || name == "avx-vnni") return CpuIsa::AvxVnni;
  if (name == "avx512" || name == "avx512-vnni") return CpuIsa::Avx512;
  if (name == "ref" || name == "scalar") return CpuIsa::Scalar;
  return std::nullopt;
}

CpuIsa cpu_isa_active() { return active_isa().load(std::memory_order_relaxed); }

void cpu_isa_force(CpuIsa isa) {
  while (!cpu_isa_supported(isa)) isa = narrower(isa);
  active_isa().store(isa, std::memory_order_relaxed);
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
