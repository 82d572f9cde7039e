// The SIMD paths of the cpu:: kernels, for tests that compare each against ref::.
#pragma once
#include <catch2/catch.hpp>

#include "kernels/dot.h"

namespace kvdesk::test {

constexpr CpuIsa kSimdIsas[] = {CpuIsa::Avx2, CpuIsa::AvxVnni, CpuIsa::Avx512};

// Runs `body(isa)` once per SIMD ISA this CPU has, with cpu:: pinned to it, then unpins.
template <class Body>
void for_each_simd_isa(Body body) {
  for (CpuIsa isa : kSimdIsas) {
    if (!cpu_isa_supported(isa)) continue;
    cpu_isa_force(isa);
    REQUIRE(cpu_isa_active() == isa);
    body(isa);
  }
  cpu_isa_force(cpu_isa_detected());
}

}  // namespace kvdesk::test
